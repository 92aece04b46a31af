//! What `printf FORMAT ARGS…` prints, as bash's builtin does: escapes decoded, each
//! conversion filled from the arguments in order with its width and precision (`%.4s`
//! keeps four characters, `%c` one, `%b` decodes escapes, `*` takes a number from the
//! arguments), the format reused while arguments remain. `printf -v p '%.18s' ~/.netrcXYZ`
//! is a path built this way.
use super::names::unescape;

/// Times the format is reused for leftover arguments, at most.
const MAX_ROUNDS: usize = 64;
/// Widths and precisions beyond this are cut to it (`%999999999s` must not allocate that).
const MAX_WIDTH: usize = 4096;

pub(super) fn printf(args: &[String]) -> String {
    let Some((format, rest)) = args.split_first() else {
        return String::new();
    };
    let format: Vec<char> = unescape(format).chars().collect();
    let mut args = Args {
        rest,
        consumed: false,
    };
    let mut out = String::new();
    for _ in 0..MAX_ROUNDS {
        args.consumed = false;
        let mut i = 0;
        while i < format.len() {
            if format[i] != '%' {
                out.push(format[i]);
                i += 1;
                continue;
            }
            i = conversion(&format, i + 1, &mut args, &mut out);
        }
        if args.rest.is_empty() || !args.consumed {
            break;
        }
    }
    out
}

struct Args<'a> {
    rest: &'a [String],
    consumed: bool,
}

impl Args<'_> {
    fn next(&mut self) -> &str {
        match self.rest.split_first() {
            Some((first, rest)) => {
                self.rest = rest;
                self.consumed = true;
                first
            }
            None => "",
        }
    }

    /// A width or precision: digits in the format, or `*` from the arguments.
    fn number(&mut self, format: &[char], i: &mut usize) -> Option<usize> {
        if format.get(*i) == Some(&'*') {
            *i += 1;
            return integer(self.next()).and_then(|n| usize::try_from(n).ok());
        }
        let start = *i;
        while format.get(*i).is_some_and(char::is_ascii_digit) {
            *i += 1;
        }
        let digits: String = format[start..*i].iter().collect();
        digits.parse().ok()
    }
}

/// One conversion from just after its `%`; returns the index after it.
fn conversion(format: &[char], mut i: usize, args: &mut Args<'_>, out: &mut String) -> usize {
    let (mut left, mut zero) = (false, false);
    while let Some(&f) = format.get(i).filter(|f| "-+ #0'".contains(**f)) {
        left |= f == '-';
        zero |= f == '0';
        i += 1;
    }
    let width = args.number(format, &mut i).unwrap_or(0).min(MAX_WIDTH);
    let precision = if format.get(i) == Some(&'.') {
        i += 1;
        Some(args.number(format, &mut i).unwrap_or(0).min(MAX_WIDTH))
    } else {
        None
    };
    let Some(&conv) = format.get(i) else {
        return i;
    };
    if conv == '(' {
        // `%(…)T`: a time, nothing a path is made of.
        let end = format[i..]
            .iter()
            .position(|&c| c == ')')
            .map_or(format.len(), |p| i + p);
        args.next();
        return end + 2;
    }
    let text = match conv {
        '%' => "%".to_owned(),
        's' | 'q' => cut(args.next(), precision),
        'b' => cut(&unescape(args.next()), precision),
        'c' => args
            .next()
            .chars()
            .next()
            .map(String::from)
            .unwrap_or_default(),
        'd' | 'i' | 'u' => integer(args.next()).unwrap_or(0).to_string(),
        'x' => format!("{:x}", integer(args.next()).unwrap_or(0)),
        'X' => format!("{:X}", integer(args.next()).unwrap_or(0)),
        'o' => format!("{:o}", integer(args.next()).unwrap_or(0)),
        c if c.is_ascii_alphabetic() => args.next().to_owned(),
        // Not a conversion: printed as written.
        _ => return i,
    };
    let pad = width.saturating_sub(text.chars().count());
    let fill = if zero && "diuxXo".contains(conv) {
        '0'
    } else {
        ' '
    };
    if left {
        out.push_str(&text);
        out.extend(std::iter::repeat_n(' ', pad));
    } else {
        out.extend(std::iter::repeat_n(fill, pad));
        out.push_str(&text);
    }
    i + 1
}

fn cut(text: &str, precision: Option<usize>) -> String {
    match precision {
        Some(n) => text.chars().take(n).collect(),
        None => text.to_owned(),
    }
}

/// A number as printf reads one: decimal, `0x` hex, `0` octal, or `'c` for a character's
/// code.
fn integer(arg: &str) -> Option<i64> {
    let arg = arg.trim();
    if let Some(c) = arg.strip_prefix(['\'', '"']) {
        return c.chars().next().map(|c| i64::from(u32::from(c)));
    }
    let (negative, digits) = match arg.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, arg.strip_prefix('+').unwrap_or(arg)),
    };
    let value = if let Some(hex) = digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        i64::from_str_radix(hex, 16).ok()?
    } else if digits.len() > 1 && digits.starts_with('0') {
        i64::from_str_radix(&digits[1..], 8).ok()?
    } else {
        digits.parse().ok()?
    };
    Some(if negative { -value } else { value })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> String {
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        printf(&args)
    }

    #[test]
    fn conversions_as_bash_prints_them() {
        assert_eq!(
            run(&["%.4s%s", ".awsXX", "/credentials"]),
            ".aws/credentials"
        );
        assert_eq!(run(&["%s%c", "~/.netr", "cat"]), "~/.netrc");
        assert_eq!(run(&["%b", "\\x2fetc"]), "/etc");
        assert_eq!(run(&["%.*s", "3", "abcdef"]), "abc");
        assert_eq!(run(&["%5s|%-3s|", "ab", "c"]), "   ab|c  |");
        assert_eq!(run(&["%03d-%x", "7", "255"]), "007-ff");
        assert_eq!(run(&["%s\\n", "a", "b"]), "a\nb\n");
        assert_eq!(run(&["%(%Y)T", "-1"]), "");
        assert_eq!(run(&["100%%"]), "100%");
        assert_eq!(run(&["%999999999s", "x"]).len(), MAX_WIDTH);
    }
}
