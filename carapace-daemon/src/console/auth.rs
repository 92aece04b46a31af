//! Who may use the console: a one-time login token, handed to a user outside every session
//! through the API, is exchanged for a cookie (`HttpOnly`, `SameSite=Strict`) naming a visit;
//! every answer also carries the visit's CSRF token and the console's own Origin, and every
//! request names the console's own Host (a page on another name that resolves to loopback —
//! DNS rebinding — gets nothing).
//!
//! Secrets are 256 bits from the OS RNG. They are kept by their sha256 only, so looking one
//! up takes the same path whatever its first characters are.
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use sha2::{Digest as _, Sha256};

/// How long a login URL works (it works once).
pub const LOGIN_TTL: Duration = Duration::from_mins(2);
/// How long a visit lasts after login.
pub const VISIT_TTL: Duration = Duration::from_hours(12);
/// The cookie naming a visit.
pub const COOKIE: &str = "carapace_console";
/// The header carrying the CSRF token of state-changing requests.
pub const CSRF_HEADER: &str = "x-carapace-csrf";
/// Most login URLs and visits kept at once (older ones are dropped first).
const MAX_ENTRIES: usize = 256;

/// 32 bytes from the kernel's RNG (`getrandom(2)`), hex-encoded; `None` when it fails (the
/// console then refuses to mint anything rather than use a weak secret).
#[must_use]
pub fn secret() -> Option<String> {
    let mut bytes = [0u8; 32];
    let mut filled = 0;
    while filled < bytes.len() {
        // SAFETY: the pointer and length describe the unfilled tail of `bytes`, which lives
        // for the whole call; flags 0 block until the pool is initialised.
        let n = unsafe {
            libc::getrandom(bytes[filled..].as_mut_ptr().cast(), bytes.len() - filled, 0)
        };
        match usize::try_from(n) {
            Ok(n) if n > 0 => filled += n,
            _ if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {}
            _ => return None,
        }
    }
    Some(crate::audit::record::hex(&bytes))
}

fn digest(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

/// A logged-in browser.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Visit {
    /// The user the login URL was made for: what they may see and answer.
    pub uid: u32,
    /// Sent back in [`CSRF_HEADER`] with every answer.
    pub csrf: String,
    expires: Instant,
}

#[derive(Default)]
struct Tables {
    /// sha256(login token) → (uid, expiry).
    logins: HashMap<[u8; 32], (u32, Instant)>,
    /// sha256(cookie value) → visit.
    visits: HashMap<[u8; 32], Visit>,
}

/// The console's secrets: pending logins and visits.
pub struct Access {
    /// Where the console listens: its Host and Origin.
    addr: SocketAddr,
    tables: Mutex<Tables>,
}

/// Why a request is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Host is not the console's address.
    WrongHost,
    /// No valid cookie: open the console with `carapace console`.
    NoVisit,
    /// The login token is unknown, used or expired.
    BadLogin,
    /// A state-changing request without the visit's CSRF token or from another origin.
    Forged,
    /// The OS RNG failed.
    NoRandomness,
}

impl Refusal {
    /// What the browser (or the person) is told.
    #[must_use]
    pub fn message(self) -> &'static str {
        match self {
            Self::WrongHost => {
                "this is the Carapace console: open it by the address `carapace console` prints"
            }
            Self::NoVisit => "not logged in: run `carapace console` for a login link",
            Self::BadLogin => {
                "this login link is not valid (each works once, for two minutes): run \
                 `carapace console` for a new one"
            }
            Self::Forged => {
                "refused: an answer must come from the console's own page (CSRF token and \
                 Origin)"
            }
            Self::NoRandomness => "the console cannot get random numbers from the kernel",
        }
    }
}

impl Access {
    #[must_use]
    pub fn new(addr: SocketAddr) -> Self {
        Self {
            addr,
            tables: Mutex::new(Tables::default()),
        }
    }

    /// The console's address.
    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The only Origin answers may come from.
    #[must_use]
    pub fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn tables(&self) -> std::sync::MutexGuard<'_, Tables> {
        self.tables.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A login URL for `uid`, valid once for [`LOGIN_TTL`].
    pub fn login_url(&self, uid: u32) -> Result<String, Refusal> {
        let token = secret().ok_or(Refusal::NoRandomness)?;
        let now = Instant::now();
        let mut t = self.tables();
        t.logins.retain(|_, (_, expires)| *expires > now);
        if t.logins.len() >= MAX_ENTRIES {
            // Someone asks for links in a loop: the oldest go first.
            if let Some(oldest) = t
                .logins
                .iter()
                .min_by_key(|(_, (_, e))| *e)
                .map(|(k, _)| *k)
            {
                t.logins.remove(&oldest);
            }
        }
        t.logins.insert(digest(&token), (uid, now + LOGIN_TTL));
        Ok(format!("{}/login?token={token}", self.origin()))
    }

    /// Spends a login token: a new visit and the cookie value naming it.
    pub fn login(&self, token: &str) -> Result<(String, Visit), Refusal> {
        let now = Instant::now();
        let mut t = self.tables();
        let (uid, expires) = t.logins.remove(&digest(token)).ok_or(Refusal::BadLogin)?;
        if expires <= now {
            return Err(Refusal::BadLogin);
        }
        let cookie = secret().ok_or(Refusal::NoRandomness)?;
        let csrf = secret().ok_or(Refusal::NoRandomness)?;
        let visit = Visit {
            uid,
            csrf,
            expires: now + VISIT_TTL,
        };
        t.visits.retain(|_, v| v.expires > now);
        if t.visits.len() >= MAX_ENTRIES {
            if let Some(oldest) = t
                .visits
                .iter()
                .min_by_key(|(_, v)| v.expires)
                .map(|(k, _)| *k)
            {
                t.visits.remove(&oldest);
            }
        }
        t.visits.insert(digest(&cookie), visit.clone());
        Ok((cookie, visit))
    }

    /// The visit a `Cookie` header names.
    pub fn visit(&self, cookie_header: Option<&str>) -> Result<Visit, Refusal> {
        let value = cookie_header
            .and_then(|h| cookie_value(h, COOKIE))
            .ok_or(Refusal::NoVisit)?;
        let now = Instant::now();
        let t = self.tables();
        t.visits
            .get(&digest(value))
            .filter(|v| v.expires > now)
            .cloned()
            .ok_or(Refusal::NoVisit)
    }

    /// Whether `host` (the Host header) names this console.
    #[must_use]
    pub fn host_ok(&self, host: Option<&str>) -> bool {
        host.is_some_and(|h| h.eq_ignore_ascii_case(&self.addr.to_string()))
    }

    /// Checks a state-changing request of `visit`: its CSRF header and its Origin.
    pub fn check_write(
        &self,
        visit: &Visit,
        csrf: Option<&str>,
        origin: Option<&str>,
    ) -> Result<(), Refusal> {
        let csrf_ok = csrf.is_some_and(|c| digest(c) == digest(&visit.csrf));
        let origin_ok = origin.is_some_and(|o| o == self.origin());
        if csrf_ok && origin_ok {
            Ok(())
        } else {
            Err(Refusal::Forged)
        }
    }

    /// The `Set-Cookie` value for a new visit.
    #[must_use]
    pub fn set_cookie(cookie: &str) -> String {
        format!(
            "{COOKIE}={cookie}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}",
            VISIT_TTL.as_secs()
        )
    }
}

/// The value of cookie `name` in a `Cookie` header (`a=1; b=2`).
#[must_use]
pub fn cookie_value<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header
        .split(';')
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim())
}

/// The value of query parameter `name` (no percent-decoding: the tokens are hex).
#[must_use]
pub fn query_param<'a>(query: Option<&'a str>, name: &str) -> Option<&'a str> {
    query?
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn access() -> Access {
        Access::new("127.0.0.1:4242".parse().unwrap())
    }

    fn token_of(url: &str) -> &str {
        url.split_once("token=").unwrap().1
    }

    #[test]
    fn secrets_are_long_random_and_distinct() {
        let a = secret().unwrap();
        let b = secret().unwrap();
        assert_eq!(a.len(), 64);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }

    #[test]
    fn a_login_token_works_once_and_gives_a_visit() {
        let a = access();
        let url = a.login_url(1000).unwrap();
        assert!(
            url.starts_with("http://127.0.0.1:4242/login?token="),
            "{url}"
        );
        let (cookie, visit) = a.login(token_of(&url)).unwrap();
        assert_eq!(visit.uid, 1000);
        assert_eq!(a.login(token_of(&url)), Err(Refusal::BadLogin), "used once");
        let header = format!("other=1; {COOKIE}={cookie}");
        assert_eq!(a.visit(Some(&header)).unwrap(), visit);
        assert_eq!(a.visit(Some("other=1")), Err(Refusal::NoVisit));
        assert_eq!(a.visit(None), Err(Refusal::NoVisit));
        let forged = format!("{COOKIE}={}", secret().unwrap());
        assert_eq!(a.visit(Some(&forged)), Err(Refusal::NoVisit));
        assert_eq!(a.login("not-a-token"), Err(Refusal::BadLogin));
    }

    #[test]
    fn an_answer_needs_the_csrf_token_and_the_consoles_origin() {
        let a = access();
        let url = a.login_url(0).unwrap();
        let (_, visit) = a.login(token_of(&url)).unwrap();
        let origin = "http://127.0.0.1:4242";
        assert!(a
            .check_write(&visit, Some(&visit.csrf), Some(origin))
            .is_ok());
        for (csrf, origin) in [
            (None, Some(origin)),
            (Some("0000"), Some(origin)),
            (Some(visit.csrf.as_str()), None),
            (Some(visit.csrf.as_str()), Some("http://evil.example")),
            (Some(visit.csrf.as_str()), Some("http://localhost:4242")),
            (Some(visit.csrf.as_str()), Some("null")),
        ] {
            assert_eq!(a.check_write(&visit, csrf, origin), Err(Refusal::Forged));
        }
    }

    #[test]
    fn only_the_consoles_own_host_is_served() {
        let a = access();
        assert!(a.host_ok(Some("127.0.0.1:4242")));
        for bad in [
            None,
            Some("localhost:4242"),
            Some("evil.example"),
            Some("127.0.0.1"),
        ] {
            assert!(!a.host_ok(bad), "{bad:?}");
        }
    }

    #[test]
    fn cookies_carry_the_safe_attributes() {
        let c = Access::set_cookie("abc");
        for part in [
            "carapace_console=abc",
            "HttpOnly",
            "SameSite=Strict",
            "Path=/",
        ] {
            assert!(c.contains(part), "{c}");
        }
    }

    proptest! {
        #[test]
        fn header_parsers_never_panic(h in ".{0,80}", q in ".{0,80}") {
            let _ = cookie_value(&h, COOKIE);
            let _ = query_param(Some(&q), "token");
            let _ = access().visit(Some(&h));
        }
    }
}
