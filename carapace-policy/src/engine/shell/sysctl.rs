//! `sysctl`: kernel settings are files under /proc/sys, and `sysctl` names them with dots.
//! `sysctl -w kernel.yama.ptrace_scope=0` (and `sysctl kernel.x=1`, which procps takes as
//! a write too) writes `/proc/sys/kernel/yama/ptrace_scope`; `-p FILE`, `--load` and
//! `--system` write whatever settings the files hold, so every file there may be written.

use crate::rules::Action;

/// Where `sysctl -p` and `--system` write: any setting.
const EVERY_SETTING: &str = "/proc/sys/**";

/// Options that take a value in the next argument.
const WITH_VALUE: [&str; 2] = ["-r", "--pattern"];

/// The file a setting's name stands for (`net.ipv4.ip_forward`, or with slashes).
fn setting_path(name: &str) -> String {
    format!(
        "/proc/sys/{}",
        name.trim_start_matches('/').replace('.', "/")
    )
}

/// The paths `sysctl ARGS` reads and writes.
pub(super) fn operations(args: &[String]) -> Vec<(Action, String)> {
    let mut out = Vec::new();
    let mut write = false;
    let mut args = args.iter().peekable();
    while let Some(a) = args.next() {
        match a.as_str() {
            "-w" | "--write" => write = true,
            "--system" => out.push((Action::Write, EVERY_SETTING.to_owned())),
            "-p" | "--load" | "-f" => {
                // An optional value: the next argument, unless it is an option or a setting.
                if let Some(file) = args.next_if(|n| !n.starts_with('-') && !n.contains('=')) {
                    out.push((Action::Read, file.clone()));
                }
                out.push((Action::Write, EVERY_SETTING.to_owned()));
            }
            o if WITH_VALUE.contains(&o) => {
                args.next();
            }
            o if o.starts_with("--load=") => {
                out.push((Action::Read, o["--load=".len()..].to_owned()));
                out.push((Action::Write, EVERY_SETTING.to_owned()));
            }
            o if (o.starts_with("-p") || o.starts_with("-f")) && !o.starts_with("--") => {
                out.push((Action::Read, o[2..].to_owned()));
                out.push((Action::Write, EVERY_SETTING.to_owned()));
            }
            o if o.starts_with('-') => {}
            setting => match setting.split_once('=') {
                Some((name, _)) => out.push((Action::Write, setting_path(name))),
                None if write => out.push((Action::Write, setting_path(setting))),
                None => out.push((Action::Read, setting_path(setting))),
            },
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ops(line: &str) -> Vec<(Action, String)> {
        let args: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
        operations(&args)
    }

    #[test]
    fn settings_are_files_under_proc_sys() {
        let w = |p: &str| (Action::Write, p.to_owned());
        assert_eq!(
            ops("-w kernel.randomize_va_space=0"),
            [w("/proc/sys/kernel/randomize_va_space")]
        );
        assert_eq!(
            ops("net/ipv4/ip_forward=1 -q"),
            [w("/proc/sys/net/ipv4/ip_forward")]
        );
        assert_eq!(ops("--system"), [w(EVERY_SETTING)]);
        assert_eq!(ops("-p"), [w(EVERY_SETTING)]);
        assert_eq!(
            ops("-p/tmp/x.conf"),
            [(Action::Read, "/tmp/x.conf".to_owned()), w(EVERY_SETTING)]
        );
        assert_eq!(
            ops("-n kernel.hostname"),
            [(Action::Read, "/proc/sys/kernel/hostname".to_owned())]
        );
        assert_eq!(
            ops("-p /etc/sysctl.d/9.conf"),
            [
                (Action::Read, "/etc/sysctl.d/9.conf".to_owned()),
                w(EVERY_SETTING)
            ]
        );
        assert!(ops("-a -r ^net").is_empty());
    }
}
