//! Just enough of Rust's lexical structure to find module declarations and
//! paths: identifiers and punctuation, with comments, string, character and
//! byte literals skipped (their text can hold anything, `crate::` included).

/// One token of a source file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Token {
    Ident(String),
    /// A string literal's contents (only needed for `#[path = "..."]`).
    Str(String),
    /// `::`
    PathSep,
    Punct(char),
}

/// A token and the 1-based line it starts on.
#[derive(Clone, Debug)]
pub struct Spanned {
    pub token: Token,
    pub line: usize,
}

/// Splits `text` into tokens. Lifetimes are dropped; numbers come out as
/// identifiers, which is harmless for what the checks look for.
pub fn tokenize(text: &str) -> Vec<Spanned> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    let count_lines = |from: usize, to: usize, line: &mut usize| {
        *line += chars[from..to.min(chars.len())].iter().filter(|&&c| c == '\n').count();
    };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            // Block comments nest in Rust.
            let start = i;
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            count_lines(start, i, &mut line);
        } else if let Some((end, contents)) = string_literal(&chars, i) {
            out.push(Spanned { token: Token::Str(contents), line });
            count_lines(i, end, &mut line);
            i = end;
        } else if c == '\'' {
            // A character literal ('x', '\n', '\u{1F600}') or a lifetime ('a).
            if next == Some('\\') {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
            }
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(Spanned { token: Token::Ident(chars[start..i].iter().collect()), line });
        } else if c == ':' && next == Some(':') {
            out.push(Spanned { token: Token::PathSep, line });
            i += 2;
        } else {
            out.push(Spanned { token: Token::Punct(c), line });
            i += 1;
        }
    }
    out
}

/// A string literal starting at `i` (`"..."`, `b"..."`, `r#"..."#`, `br"..."`,
/// `c"..."`): the index just past it and its raw contents.
fn string_literal(chars: &[char], i: usize) -> Option<(usize, String)> {
    let mut j = i;
    // An identifier character before the prefix means this is the middle of
    // an identifier, not a literal prefix.
    if i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_') {
        return None;
    }
    if matches!(chars.get(j), Some('b') | Some('c')) {
        j += 1;
    }
    let raw = chars.get(j) == Some(&'r');
    if raw {
        j += 1;
    }
    let mut hashes = 0;
    while raw && chars.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    if chars.get(j) != Some(&'"') {
        return None;
    }
    j += 1;
    let start = j;
    while j < chars.len() {
        if !raw && chars[j] == '\\' {
            j += 2;
            continue;
        }
        if chars[j] == '"' && (0..hashes).all(|h| chars.get(j + 1 + h) == Some(&'#')) {
            let contents = chars[start..j].iter().collect();
            return Some((j + 1 + hashes, contents));
        }
        j += 1;
    }
    Some((chars.len(), chars[start..].iter().collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idents(text: &str) -> Vec<String> {
        tokenize(text)
            .into_iter()
            .filter_map(|t| match t.token {
                Token::Ident(s) => Some(s),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn skips_comments_strings_and_chars() {
        let text = "a // crate::x\n/* /* crate::y */ */ b \"crate::z\" r#\"crate::\"w\"# '\"' 'c' '\\'' &'a d";
        assert_eq!(idents(text), ["a", "b", "d"]);
    }

    #[test]
    fn counts_lines_through_literals() {
        let tokens = tokenize("a\n\"x\ny\"\nb /*\n*/ c");
        let lines: Vec<usize> = tokens.iter().map(|t| t.line).collect();
        assert_eq!(lines, [1, 2, 4, 5]);
    }

    #[test]
    fn keeps_path_attribute_strings() {
        let tokens = tokenize("#[path = \"gemm_tc.rs\"] mod tc;");
        assert!(tokens.iter().any(|t| t.token == Token::Str("gemm_tc.rs".into())));
    }
}
