//! The server name of a TLS `ClientHello` (RFC 8446 §4.1.2, RFC 6066 §3), read from the
//! first bytes a client sends, which are untrusted: every length is checked against what
//! holds it, and the whole is bounded. The `ClientHello` may span several handshake records;
//! they are joined. Anything a TLS server would not take as a `ClientHello` is malformed, so
//! that the name checked is the one the server reads.

use super::server_name::host_name;
use super::Reading;

/// Record content type of handshake messages.
const HANDSHAKE: u8 = 22;
/// Handshake message type of a `ClientHello`.
const CLIENT_HELLO: u8 = 1;
/// Largest record payload (2^14, RFC 8446 §5.1).
const MAX_RECORD: usize = 16_384;
/// Largest `ClientHello` taken (its handshake body). Real ones are a few hundred bytes to a
/// few KiB (post-quantum key shares, resumption tickets); past this the connection is
/// refused rather than buffered.
const MAX_HANDSHAKE: usize = 32 * 1024;
/// Most bytes read before deciding: the `ClientHello` and the record headers around it
/// (a client that cuts it into tiny records past this is refused).
pub const MAX_HELLO: usize = MAX_HANDSHAKE + 4 + 5 * (MAX_HANDSHAKE / MAX_RECORD + 2);

/// Extension types read or refused.
const SERVER_NAME: u16 = 0;
/// `encrypted_client_hello`: the name in clear is then a public front, the real one is
/// encrypted (RFC 9849). The check cannot see the real name, so it refuses.
const ENCRYPTED_CLIENT_HELLO: u16 = 0xfe0d;
/// `host_name`, the one name type of the `server_name` extension.
const HOST_NAME: u8 = 0;

/// What a `ClientHello` asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    /// The server name (lowercase), if the client sent one.
    pub server_name: Option<String>,
    /// It carries an encrypted `ClientHello`: the server may act on a name not shown here.
    pub encrypted: bool,
}

/// Reads the `ClientHello` at the start of `bytes` (the client's first bytes, as many as
/// arrived; bytes after the `ClientHello` are not looked at).
#[must_use]
pub fn read_client_hello(bytes: &[u8]) -> Reading<Hello> {
    match handshake(bytes) {
        Reading::More => Reading::More,
        Reading::Malformed(why) => Reading::Malformed(why),
        Reading::Done(body) => match parse_body(&body) {
            Ok(hello) => Reading::Done(hello),
            Err(why) => Reading::Malformed(why),
        },
    }
}

/// The `ClientHello` handshake body, joined from the records that carry it.
fn handshake(bytes: &[u8]) -> Reading<Vec<u8>> {
    let mut message = Vec::new();
    let mut rest = bytes;
    loop {
        // What the message says it is, once its header has arrived.
        if message.len() >= 4 {
            if message[0] != CLIENT_HELLO {
                return Reading::Malformed("the first handshake message is not a ClientHello");
            }
            let len = usize::from(message[1]) << 16
                | usize::from(message[2]) << 8
                | usize::from(message[3]);
            if len > MAX_HANDSHAKE {
                return Reading::Malformed("the ClientHello is longer than 32 KiB");
            }
            if message.len() >= 4 + len {
                message.truncate(4 + len);
                message.drain(..4);
                return Reading::Done(message);
            }
        }
        let Some(header) = rest.get(..5) else {
            return Reading::More;
        };
        if header[0] != HANDSHAKE {
            return Reading::Malformed("not a TLS handshake record");
        }
        // 3.0 (SSL 3, seen in first records) to 3.4; TLS 1.3 freezes it at 3.1–3.3.
        if header[1] != 3 || header[2] > 4 {
            return Reading::Malformed("not a TLS record version");
        }
        let len = usize::from(u16::from_be_bytes([header[3], header[4]]));
        if len == 0 || len > MAX_RECORD {
            return Reading::Malformed("a TLS record length out of range");
        }
        let Some(payload) = rest.get(5..5 + len) else {
            return Reading::More;
        };
        message.extend_from_slice(payload);
        rest = &rest[5 + len..];
    }
}

/// A cursor over untrusted bytes: every read says whether the bytes were there.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], &'static str> {
        if self.0.len() < n {
            return Err("a ClientHello field runs past its end");
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8, &'static str> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, &'static str> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    /// A vector with a one-byte length.
    fn vec8(&mut self) -> Result<&'a [u8], &'static str> {
        let n = self.u8()?;
        self.take(usize::from(n))
    }

    /// A vector with a two-byte length.
    fn vec16(&mut self) -> Result<&'a [u8], &'static str> {
        let n = self.u16()?;
        self.take(usize::from(n))
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

fn parse_body(body: &[u8]) -> Result<Hello, &'static str> {
    let mut c = Cursor(body);
    let version = c.take(2)?;
    if version[0] != 3 {
        return Err("not a TLS ClientHello version");
    }
    c.take(32)?; // random
    if c.vec8()?.len() > 32 {
        return Err("a session id longer than 32 bytes");
    }
    let suites = c.vec16()?;
    if suites.len() < 2 || suites.len() % 2 != 0 {
        return Err("a cipher suite list of odd or no length");
    }
    if c.vec8()?.is_empty() {
        return Err("no compression method");
    }
    let mut hello = Hello {
        server_name: None,
        encrypted: false,
    };
    // A ClientHello of TLS 1.2 and before may end here: no extensions, no name.
    if c.is_empty() {
        return Ok(hello);
    }
    let mut extensions = Cursor(c.vec16()?);
    if !c.is_empty() {
        return Err("bytes after the ClientHello's extensions");
    }
    let mut seen: Vec<u16> = Vec::new();
    while !extensions.is_empty() {
        let kind = extensions.u16()?;
        let data = extensions.vec16()?;
        // RFC 8446 §4.2: a server refuses a ClientHello with an extension twice; two
        // server names would let the check read one and the server the other.
        if seen.contains(&kind) {
            return Err("an extension appears twice");
        }
        seen.push(kind);
        match kind {
            SERVER_NAME => hello.server_name = Some(server_name(data)?),
            ENCRYPTED_CLIENT_HELLO => hello.encrypted = true,
            _ => {}
        }
    }
    Ok(hello)
}

/// The `server_name` extension's one host name.
fn server_name(data: &[u8]) -> Result<String, &'static str> {
    let mut outer = Cursor(data);
    let mut list = Cursor(outer.vec16()?);
    if !outer.is_empty() {
        return Err("bytes after the server name list");
    }
    let mut name = None;
    while !list.is_empty() {
        let kind = list.u8()?;
        let bytes = list.vec16()?;
        // RFC 6066 §3: one name per type, and `host_name` is the only type there is.
        if kind != HOST_NAME {
            return Err("a server name of an unknown type");
        }
        if name.is_some() {
            return Err("two host names in the server name list");
        }
        name = Some(host_name(bytes).ok_or("a server name that is not a host name")?);
    }
    name.ok_or("an empty server name list")
}
