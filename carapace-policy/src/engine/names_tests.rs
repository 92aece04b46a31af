use std::net::IpAddr;

use super::*;
use crate::rules::encrypted_dns::DOT_PORT;
use crate::rules::model::Cidr;
use crate::rules::{Homes, Options};

fn fake_resolver(host: &str) -> Option<Vec<IpAddr>> {
    match host {
        "pastebin.com" => Some(vec!["192.0.2.9".parse().ok()?]),
        _ => None,
    }
}

fn set(rules: &str) -> RuleSet {
    let text = format!("version: 1\nbuiltin: none\nrules:\n{rules}");
    let opts = Options {
        homes: Homes::fixed(["/home/alice"]),
        resolver: fake_resolver,
        host: crate::host::real::host(),
    };
    RuleSet::parse_with("t.yaml", &text, &opts).unwrap_or_else(|d| panic!("{d}\n{text}"))
}

const ALLOW_LIST: &str = "  - id: egress
    block: { host: \"*\" }
    except: [api.github.com, \"*.pythonhosted.org\", 10.20.0.0/16, { host: pypi.org, port: 443 }]
    message: only listed hosts
";

fn refused_by(v: &NameVerdict) -> Option<&str> {
    match v {
        NameVerdict::Refused { rule_id, .. } => Some(rule_id),
        NameVerdict::Allowed { .. } => None,
    }
}

fn index(set: &RuleSet, id: &str) -> u32 {
    set.by_id(id)
        .and_then(|r| r.kernel_index)
        .unwrap_or_else(|| panic!("{id} has no kernel index"))
}

#[test]
fn names_cover_themselves_and_their_subdomains_wildcards_only_subdomains() {
    assert!(covers("example.com", "example.com"));
    assert!(covers("example.com", "API.Example.COM."));
    assert!(covers("example.com.", "a.b.example.com"));
    assert!(!covers("example.com", "badexample.com"));
    assert!(!covers("example.com", "com"));
    assert!(covers("*.example.com", "a.example.com"));
    assert!(!covers("*.example.com", "example.com"));
    assert!(!covers("*.example.com", "aexample.com"));
    assert!(!covers("example.com", ""));
    // Bytes, not characters: no slice splits one.
    assert!(!covers("é.com", "xé.com"));
    assert!(covers("é.com", "x.é.com"));
}

#[test]
fn an_allow_list_refuses_names_it_does_not_except() {
    let set = set(ALLOW_LIST);
    let all = Activation::default();
    let egress = index(&set, "egress");
    assert_eq!(
        verdict(&set, &all, "api.github.com."),
        NameVerdict::Allowed {
            excepted: vec![egress]
        }
    );
    assert_eq!(
        verdict(&set, &all, "uploads.API.github.com"),
        NameVerdict::Allowed {
            excepted: vec![egress]
        }
    );
    assert_eq!(
        verdict(&set, &all, "files.pythonhosted.org"),
        NameVerdict::Allowed {
            excepted: vec![egress]
        }
    );
    // An exception on some ports still allows the lookup, but adds no kernel exception:
    // learned as one, its addresses would be open on every port.
    assert_eq!(
        verdict(&set, &all, "pypi.org"),
        NameVerdict::Allowed { excepted: vec![] }
    );
    match verdict(&set, &all, "pythonhosted.org") {
        NameVerdict::Refused { rule_id, message } => {
            assert_eq!(
                (rule_id.as_str(), message.as_str()),
                ("egress", "only listed hosts")
            );
        }
        v @ NameVerdict::Allowed { .. } => panic!("the apex is not a subdomain: {v:?}"),
    }
    assert_eq!(
        refused_by(&verdict(&set, &all, "github.com")),
        Some("egress")
    );
    assert_eq!(
        refused_by(&verdict(&set, &all, "evil.example")),
        Some("egress")
    );
}

#[test]
fn a_port_restricted_allow_list_never_refuses_a_lookup() {
    let set = set("  - id: web-only
    block: { host: \"*\", port: [80, 443] }
    except: [example.org]
");
    let all = Activation::default();
    assert_eq!(
        verdict(&set, &all, "elsewhere.test"),
        NameVerdict::Allowed { excepted: vec![] }
    );
    assert_eq!(
        verdict(&set, &all, "www.example.org"),
        NameVerdict::Allowed {
            excepted: vec![index(&set, "web-only")]
        }
    );
}

#[test]
fn rules_naming_hosts_refuse_them_and_their_subdomains() {
    let set = set("  - id: no-paste
    block: { host: pastebin.com }
    message: no pastes
  - id: no-ngrok
    block: { host: \"*.ngrok.io\" }
  - id: ssh-to-git
    block: { host: git.example.com, port: 22 }
  - id: warned
    warn: { host: warned.example }
");
    let all = Activation::default();
    assert_eq!(
        refused_by(&verdict(&set, &all, "pastebin.com")),
        Some("no-paste")
    );
    assert_eq!(
        refused_by(&verdict(&set, &all, "Raw.Pastebin.com")),
        Some("no-paste")
    );
    assert_eq!(
        refused_by(&verdict(&set, &all, "abc.ngrok.io")),
        Some("no-ngrok")
    );
    for allowed in [
        "ngrok.io",
        "git.example.com",
        "warned.example",
        "docs.rs",
        "pastebin.co",
    ] {
        assert_eq!(
            verdict(&set, &all, allowed),
            NameVerdict::Allowed { excepted: vec![] },
            "{allowed}"
        );
    }
}

#[test]
fn the_first_refusing_rule_wins_and_exceptions_are_per_rule() {
    let set = set(&format!(
        "  - id: no-gist
    block: {{ host: gist.github.com }}
  - id: corp
    block: {{ host: corp.example }}
    except: [docs.corp.example]
{ALLOW_LIST}"
    ));
    let all = Activation::default();
    assert_eq!(
        refused_by(&verdict(&set, &all, "gist.github.com")),
        Some("no-gist")
    );
    assert_eq!(
        refused_by(&verdict(&set, &all, "corp.example")),
        Some("corp")
    );
    // Excepted by `corp`, refused by the allow-list all the same.
    assert_eq!(
        refused_by(&verdict(&set, &all, "docs.corp.example")),
        Some("egress")
    );
    // Named by no rule but the allow-list's exception.
    assert!(matches!(
        verdict(&set, &all, "api.github.com"),
        NameVerdict::Allowed { excepted } if excepted == vec![index(&set, "egress")]
    ));
}

#[test]
fn only_rules_in_force_speak() {
    let set = set("  - id: after-fetch
    block: { host: \"*\" }
    except: [docs.rs]
    trigger: { after: { actions: [network], tool: [WebFetch] } }
  - id: no-paste
    block: { host: pastebin.com }
");
    let idle = Activation::default();
    assert_eq!(
        verdict(&set, &idle, "example.com"),
        NameVerdict::Allowed { excepted: vec![] }
    );
    let triggered = Activation {
        activated: ["after-fetch".to_owned()].into(),
        ..Activation::default()
    };
    assert_eq!(
        refused_by(&verdict(&set, &triggered, "example.com")),
        Some("after-fetch")
    );
    let disabled = Activation {
        disabled: ["no-paste".to_owned()].into(),
        ..Activation::default()
    };
    assert_eq!(
        verdict(&set, &disabled, "pastebin.com"),
        NameVerdict::Allowed { excepted: vec![] }
    );
    assert_eq!(
        refused_by(&verdict(&set, &idle, "pastebin.com")),
        Some("no-paste")
    );
}

#[test]
fn which_rule_sets_need_a_resolver() {
    assert!(needs_resolver(&set(ALLOW_LIST)));
    assert!(needs_resolver(&set("  - block: { host: pastebin.com }\n")));
    assert!(needs_resolver(&set(
        "  - block: { host: \"*.ngrok.io\" }\n"
    )));
    assert!(needs_resolver(&set(
        "  - block: { cidr: \"::/0\" }\n    except: [::1]\n"
    )));
    // Triggered rules may come into force later in the session.
    assert!(needs_resolver(&set(
        "  - block: { host: \"*\" }\n    trigger: { after: { actions: [network] } }\n"
    )));
    assert!(!needs_resolver(&set(
        "  - block: { host: 169.254.169.254 }\n"
    )));
    assert!(!needs_resolver(&set("  - block: { cidr: 10.0.0.0/8 }\n")));
    assert!(!needs_resolver(&set("  - warn: { host: pastebin.com }\n")));
    assert!(needs_resolver(&set(
        "  - approve: { host: pastebin.com }\n"
    )));
    assert!(!needs_resolver(&set("  - approve: { cidr: 10.0.0.0/8 }\n")));
    assert!(!needs_resolver(&set("  - block: \"~/.ssh/**\"\n")));
}

#[test]
fn private_ranges() {
    for private in [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "100.127.255.255",
        "0.0.0.0",
        "::1",
        "::",
        "fd00::1",
        "fc00::1",
        "fe80::1",
        "::ffff:10.0.0.1",
        "0.1.2.3",
        "fec0::1",
        // The metadata service and loopback through NAT64 and 6to4.
        "64:ff9b::a9fe:a9fe",
        "64:ff9b:1::7f00:1",
        "2002:7f00:1::",
        "2002:a9fe:a9fe::1",
    ] {
        assert!(is_private(private.parse().unwrap()), "{private}");
    }
    for public in [
        "8.8.8.8",
        "100.128.0.1",
        "172.32.0.1",
        "2606:4700::1111",
        "192.0.2.1",
        "64:ff9b::808:808",
        "2002:808:808::1",
    ] {
        assert!(!is_private(public.parse().unwrap()), "{public}");
    }
}

#[test]
fn allowed_names_may_point_at_private_addresses_only_through_address_exceptions() {
    let set = set(&format!(
        "{ALLOW_LIST}  - id: local
    block: {{ cidr: \"::/0\" }}
    except: [localhost]
"
    ));
    let all = Activation::default();
    let refused = |name: &str, addr: &str| {
        private_answer_refused(&set, &all, name, addr.parse().unwrap()).map(|r| r.id.clone())
    };
    assert_eq!(refused("api.github.com", "140.82.112.5"), None);
    assert_eq!(
        refused("api.github.com", "169.254.169.254"),
        Some("egress".into())
    );
    assert_eq!(refused("api.github.com", "10.0.0.8"), Some("egress".into()));
    assert_eq!(refused("api.github.com", "10.20.3.4"), None);
    assert_eq!(refused("api.github.com", "::ffff:10.20.3.4"), None);
    // localhost is excepted by `local` but not by the allow-list `egress`.
    assert_eq!(refused("localhost", "127.0.0.1"), None);
    assert_eq!(refused("localhost", "10.0.0.1"), Some("local".into()));
}

#[test]
fn blocked_names_refuse_their_learned_addresses_by_rule_and_port() {
    let set = set(&format!(
        "  - id: no-paste
    block: {{ host: \"*.pastebin.com\" }}
  - id: ssh-to-git
    block: {{ host: [git.example.com, \"*.git.example.com\"], port: [22, 2222] }}
    except: [{{ host: ok.git.example.com, port: 22 }}, free.git.example.com]
  - id: later
    block: {{ host: late.example }}
    trigger: {{ after: {{ actions: [network], tool: [WebFetch] }} }}
  - id: warned
    warn: {{ host: warned.example }}
  - id: asked
    approve: {{ host: asked.example, port: 8443 }}
{ALLOW_LIST}"
    ));
    let block = |id: &str, port: u16| NameBlock {
        rule: index(&set, id),
        port,
    };
    assert_eq!(
        blocked_by(&set, "Raw.Pastebin.com."),
        [block("no-paste", 0)]
    );
    assert_eq!(
        blocked_by(&set, "git.example.com"),
        [block("ssh-to-git", 22), block("ssh-to-git", 2222)]
    );
    // An exception on some ports only: every port of the rule stays refused (fail closed).
    assert_eq!(
        blocked_by(&set, "ok.git.example.com"),
        [block("ssh-to-git", 22), block("ssh-to-git", 2222)]
    );
    // Excepted on every port.
    assert_eq!(blocked_by(&set, "free.git.example.com"), []);
    // Not in force yet: listed all the same, the kernel checks the session's state.
    assert_eq!(blocked_by(&set, "late.example"), [block("later", 0)]);
    // Approve mode: refused by the kernel until a human approves the address and port.
    assert_eq!(blocked_by(&set, "asked.example"), [block("asked", 8443)]);
    // Not a kernel rule; the allow-list's base refuses every address already; no rule.
    for name in [
        "warned.example",
        "api.github.com",
        "pastebin.com",
        "docs.rs",
    ] {
        assert_eq!(blocked_by(&set, name), [], "{name}");
    }
}

#[test]
fn an_allow_list_over_every_port_refuses_encrypted_dns_unless_it_names_the_resolver() {
    let set = set("  - id: egress
    block: { host: \"*\" }
    except: [\"*.google\", 1.0.0.0/8, dns.quad9.net, 9.9.9.9, { cidr: 10.0.0.0/8, port: 853 }]
  - id: web
    block: { host: \"*\", port: 80 }
    except: [\"*.google\"]
");
    let all = Activation::default();
    // Through a wildcard exception: refused by the guard the allow-list brings.
    assert_eq!(
        refused_by(&verdict(&set, &all, "dns.google")),
        Some("egress/encrypted-dns")
    );
    // Named by the exception itself: allowed.
    assert!(matches!(
        verdict(&set, &all, "dns.quad9.net"),
        NameVerdict::Allowed { .. }
    ));
    assert!(matches!(
        verdict(&set, &all, "mail.google"),
        NameVerdict::Allowed { .. }
    ));
    // A port-limited allow-list brings no guard.
    assert!(set.by_id("web/encrypted-dns").is_none());
    assert!(set.by_id("web/dns-over-tls").is_none());

    let guard = index(&set, "egress/encrypted-dns");
    let dot = index(&set, "egress/dns-over-tls");
    let img = set.kernel_image();
    let refs = |addr: &str| {
        let addr = match addr.parse::<IpAddr>().unwrap() {
            IpAddr::V4(v4) => (128, v4.to_ipv6_mapped().octets()),
            IpAddr::V6(v6) => (128, v6.octets()),
        };
        img.nets.get(&addr).cloned().unwrap_or_default()
    };
    let blocks = |addr: &str, rule: u32, port: u16| {
        refs(addr)
            .iter()
            .any(|r| r.rule == rule && r.port == port && r.flags & carapace_common::REF_EXCEPT == 0)
    };
    let excepts = |addr: &str, rule: u32| {
        refs(addr)
            .iter()
            .any(|r| r.rule == rule && r.flags & carapace_common::REF_EXCEPT != 0)
    };
    // 1.1.1.1 is inside the allow-list's 1.0.0.0/8, and refused on every port by the guard,
    // which has no exception for it; 9.9.9.9 is named, so the guard excepts it.
    assert!(blocks("1.1.1.1", guard, 0));
    assert!(!excepts("1.1.1.1", guard));
    assert!(blocks("2606:4700:4700::1111", guard, 0));
    assert!(
        blocks("9.9.9.9", guard, 0) && excepts("9.9.9.9", guard),
        "{guard}: {:?}",
        refs("9.9.9.9")
    );
    // Port 853 everywhere, but where an exception names it.
    let any = img.nets.get(&(0, [0; 16])).cloned().unwrap_or_default();
    assert!(any.iter().any(|r| r.rule == dot && r.port == DOT_PORT));
    let corp = img
        .nets
        .get(&(104, Cidr::new(mapped_v4([10, 0, 0, 0]), 104).addr))
        .cloned()
        .unwrap_or_default();
    assert!(
        corp.iter().any(|r| r.rule == dot
            && r.port == DOT_PORT
            && r.flags & carapace_common::REF_EXCEPT != 0),
        "{corp:?}"
    );
}

fn mapped_v4(v4: [u8; 4]) -> [u8; 16] {
    std::net::Ipv4Addr::from(v4).to_ipv6_mapped().octets()
}

// ---- tls: sni ----

const SNI_RULES: &str = "  - id: egress
    block: { host: \"*\" }
    except: [github.com, \"*.githubusercontent.com\", { host: pypi.org, port: 443 }]
    tls: sni
  - id: no-gist
    block: { host: gist.github.com }
    tls: sni
  - id: web-only
    block: { host: \"*.example\", port: 80 }
    tls: sni
  - id: not-checked
    block: { host: raw.githubusercontent.com }
";

fn sni_refused(set: &RuleSet, name: Option<&str>, port: u16) -> Option<String> {
    match sni_verdict(set, &Activation::default(), name, port) {
        SniVerdict::Pass => None,
        SniVerdict::Refused { rule_id, .. } => Some(rule_id),
    }
}

#[test]
fn sni_names_are_judged_as_the_resolver_judges_them() {
    let set = set(SNI_RULES);
    assert!(needs_sni_check(&set));
    for (name, port, want) in [
        (Some("github.com"), 443, None),
        (Some("API.GitHub.com."), 443, None),
        (Some("objects.githubusercontent.com"), 443, None),
        // The wildcard covers subdomains only.
        (Some("githubusercontent.com"), 443, Some("egress")),
        (Some("pastebin.com"), 443, Some("egress")),
        (Some("gist.github.com"), 443, Some("no-gist")),
        // An exception on some ports admits the name on those only.
        (Some("pypi.org"), 443, None),
        (Some("pypi.org"), 80, Some("egress")),
        // No name under an allow-list: refused.
        (None, 443, Some("egress")),
    ] {
        assert_eq!(
            sni_refused(&set, name, port).as_deref(),
            want,
            "{name:?} on {port}"
        );
    }
}

#[test]
fn only_tls_sni_rules_check_names_and_on_their_ports() {
    let set = set("  - id: egress-8443
    block: { host: \"*\", port: 8443 }
    except: [github.com]
    tls: sni
  - id: web-only
    block: { host: \"*.example\", port: 80 }
    tls: sni
  - id: not-checked
    block: { host: raw.githubusercontent.com }
");
    // A rule without `tls: sni` does not check server names.
    assert_eq!(
        sni_refused(&set, Some("raw.githubusercontent.com"), 443),
        None
    );
    // A rule limited to some ports checks those only.
    assert_eq!(sni_refused(&set, Some("a.example"), 443), None);
    assert_eq!(
        sni_refused(&set, Some("a.example"), 80).as_deref(),
        Some("web-only")
    );
    assert_eq!(
        sni_refused(&set, Some("pastebin.com"), 8443).as_deref(),
        Some("egress-8443")
    );
    // No name: refused only where an allow-list is checked.
    assert_eq!(sni_refused(&set, None, 443), None);
    assert_eq!(
        sni_refused(&set, None, 8443).as_deref(),
        Some("egress-8443")
    );
    assert!(!needs_sni_check(&self::set(
        "  - block: { host: github.com }\n"
    )));
}
