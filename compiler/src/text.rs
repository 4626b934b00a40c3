//! Names from models and files, made safe to print: a tensor or node name
//! is attacker-controlled text, and printed raw a newline in it could forge
//! an `error:` line, or an escape sequence rewrite the terminal.

/// `s` with control characters (newlines, escapes, NUL) and bidirectional
/// overrides written as Rust escapes (`\n`, `\u{1b}`); other text unchanged.
pub fn printable(s: &str) -> std::borrow::Cow<'_, str> {
    let unsafe_char =
        |c: char| c.is_control() || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
    if !s.chars().any(unsafe_char) {
        return s.into();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if unsafe_char(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out.into()
}

#[cfg(test)]
mod tests {
    use super::printable;

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(printable("plain/name:0 ünï"), "plain/name:0 ünï");
        assert_eq!(printable("a\nerror: forged"), "a\\nerror: forged");
        assert_eq!(printable("\u{1b}[2J\r\0"), "\\u{1b}[2J\\r\\u{0}");
        assert_eq!(printable("x\u{202e}y"), "x\\u{202e}y");
    }
}
