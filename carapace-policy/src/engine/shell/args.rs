//! Command-line option parsing as getopt does it, told which options take a value: short
//! clusters (`-xzf FILE`, `-n5`), long options (`--out FILE`, `--out=FILE`) and `--`.
pub(super) struct Opts<'a> {
    /// Options in order, each with its value if it takes one (`-x` for short, `--long`).
    pub flags: Vec<(String, Option<&'a str>)>,
    pub operands: Vec<&'a str>,
    /// With `stop_at_operand`: the first operand and everything after it (a wrapped
    /// command and its own arguments).
    pub rest: &'a [String],
}

/// `valued` lists the options that take a value (`-o`, `--output`).
pub(super) fn parse<'a>(args: &'a [String], valued: &[&str], stop_at_operand: bool) -> Opts<'a> {
    let mut opts = Opts {
        flags: Vec::new(),
        operands: Vec::new(),
        rest: &[],
    };
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_str();
        i += 1;
        if arg == "--" {
            if stop_at_operand {
                opts.rest = &args[i..];
                return opts;
            }
            opts.operands.extend(args[i..].iter().map(String::as_str));
            break;
        }
        if let Some(long) = arg.strip_prefix("--") {
            match long.split_once('=') {
                Some((name, value)) => opts.flags.push((format!("--{name}"), Some(value))),
                None if valued.contains(&arg) => {
                    opts.flags
                        .push((arg.to_owned(), args.get(i).map(String::as_str)));
                    i += 1;
                }
                None => opts.flags.push((arg.to_owned(), None)),
            }
            continue;
        }
        if arg.len() > 1 && arg.starts_with('-') {
            for (j, c) in arg.char_indices().skip(1) {
                // Built by hand: `format!` costs several times the two pushes, once per
                // option letter of every command.
                let mut name = String::with_capacity(1 + c.len_utf8());
                name.push('-');
                name.push(c);
                if valued.contains(&name.as_str()) {
                    let attached = &arg[j + c.len_utf8()..];
                    let value = if attached.is_empty() {
                        i += 1;
                        args.get(i - 1).map(String::as_str)
                    } else {
                        Some(attached)
                    };
                    opts.flags.push((name, value));
                    break;
                }
                opts.flags.push((name, None));
            }
            continue;
        }
        if stop_at_operand {
            opts.rest = &args[i - 1..];
            return opts;
        }
        opts.operands.push(arg);
    }
    opts
}

impl<'a> Opts<'a> {
    pub fn has(&self, names: &[&str]) -> bool {
        self.flags.iter().any(|(f, _)| names.contains(&f.as_str()))
    }

    pub fn values(&self, names: &[&str]) -> Vec<&'a str> {
        self.flags
            .iter()
            .filter(|(f, _)| names.contains(&f.as_str()))
            .filter_map(|(_, v)| *v)
            .collect()
    }

    pub fn value(&self, names: &[&str]) -> Option<&'a str> {
        self.values(names).pop()
    }
}
