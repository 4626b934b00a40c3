//! A reader for protobuf text format, the language of Triton's
//! `config.pbtxt`, into an untyped tree. The typed reading (which fields
//! exist, of which kind) is `model_config`'s job; this module knows only the
//! syntax: `name: value`, `name { ... }` (or `name: { ... }`, `< ... >`),
//! `name: [v, v]` (or `name [{...}, {...}]`) for repeated fields, `#` comments, and `;` or `,` between
//! fields.

use std::fmt;

/// A parsed message: its fields in file order (a repeated field appears once
/// per value).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Message {
    pub fields: Vec<Field>,
}

/// One field with the line it starts on, for error messages.
#[derive(Clone, Debug, PartialEq)]
pub struct Field {
    pub name: String,
    pub line: usize,
    pub value: Value,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A number as written (`-1`, `0x10`, `1.5e3`).
    Number(String),
    /// A quoted string, escapes resolved.
    String(String),
    /// A bare identifier: an enum value or `true`/`false`.
    Ident(String),
    Message(Message),
}

impl Value {
    /// What kind of value this is, as an error message says it.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Number(_) => "a number",
            Value::String(_) => "a string",
            Value::Ident(_) => "an identifier",
            Value::Message(_) => "a message",
        }
    }
}

/// A syntax error with the line it was found on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyntaxError {
    pub line: usize,
    pub message: String,
}

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// Deeper nesting than this is refused (the tree is built recursively).
pub const MAX_DEPTH: usize = 64;

/// Parses a whole text-format message.
pub fn parse(text: &str) -> Result<Message, SyntaxError> {
    let tokens = tokenize(text)?;
    let mut p = Parser { tokens, at: 0, depth: 0 };
    let m = p.message(None)?;
    Ok(m)
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    Number(String),
    String(String),
    Punct(char),
}

struct Parser {
    tokens: Vec<(Tok, usize)>,
    at: usize,
    depth: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.tokens.get(self.at).map(|(t, _)| t)
    }

    fn line(&self) -> usize {
        self.tokens.get(self.at).or(self.tokens.last()).map_or(1, |(_, l)| *l)
    }

    fn error<T>(&self, message: impl Into<String>) -> Result<T, SyntaxError> {
        Err(SyntaxError { line: self.line(), message: message.into() })
    }

    fn next(&mut self) -> Option<Tok> {
        let t = self.tokens.get(self.at).map(|(t, _)| t.clone());
        self.at += 1;
        t
    }

    /// Fields up to `close` (or the end of input for the top level).
    fn message(&mut self, close: Option<char>) -> Result<Message, SyntaxError> {
        let mut fields = Vec::new();
        loop {
            match self.peek() {
                None if close.is_none() => return Ok(Message { fields }),
                None => return self.error(format!("missing '{}' at the end of the file", close.unwrap_or('}'))),
                Some(Tok::Punct(c)) if Some(*c) == close => {
                    self.at += 1;
                    return Ok(Message { fields });
                }
                Some(Tok::Ident(_)) => {}
                Some(t) => return self.error(format!("expected a field name, found {}", describe(t))),
            }
            let line = self.line();
            let Some(Tok::Ident(name)) = self.next() else { unreachable!("peeked an identifier") };
            let colon = self.peek() == Some(&Tok::Punct(':'));
            if colon {
                self.at += 1;
            }
            match self.peek() {
                Some(Tok::Punct('[')) => {
                    self.at += 1;
                    if self.peek() == Some(&Tok::Punct(']')) {
                        self.at += 1;
                    } else {
                        loop {
                            let value = self.value()?;
                            fields.push(Field { name: name.clone(), line, value });
                            match self.next() {
                                Some(Tok::Punct(',')) => {}
                                Some(Tok::Punct(']')) => break,
                                _ => return self.error(format!("expected ',' or ']' in the list of '{name}'")),
                            }
                        }
                    }
                }
                Some(Tok::Punct('{' | '<')) => {
                    let value = self.value()?;
                    fields.push(Field { name, line, value });
                }
                _ if colon => {
                    let value = self.value()?;
                    fields.push(Field { name, line, value });
                }
                _ => return self.error(format!("expected ':' or '{{' after '{name}'")),
            }
            if matches!(self.peek(), Some(Tok::Punct(';' | ','))) {
                self.at += 1;
            }
        }
    }

    fn value(&mut self) -> Result<Value, SyntaxError> {
        match self.next() {
            Some(Tok::Number(n)) => Ok(Value::Number(n)),
            Some(Tok::String(s)) => {
                // Adjacent strings concatenate, as in C.
                let mut s = s;
                while let Some(Tok::String(more)) = self.peek() {
                    s.push_str(more);
                    self.at += 1;
                }
                Ok(Value::String(s))
            }
            Some(Tok::Ident(i)) => Ok(Value::Ident(i)),
            Some(Tok::Punct(open @ ('{' | '<'))) => {
                if self.depth >= MAX_DEPTH {
                    self.at -= 1;
                    return self.error(format!("messages nested deeper than {MAX_DEPTH}"));
                }
                self.depth += 1;
                let m = self.message(Some(if open == '{' { '}' } else { '>' }))?;
                self.depth -= 1;
                Ok(Value::Message(m))
            }
            Some(t) => {
                self.at -= 1;
                self.error(format!("expected a value, found {}", describe(&t)))
            }
            None => self.error("expected a value, found the end of the file"),
        }
    }
}

fn describe(t: &Tok) -> String {
    match t {
        Tok::Ident(i) => format!("'{i}'"),
        Tok::Number(n) => format!("the number {n}"),
        Tok::String(_) => "a string".to_string(),
        Tok::Punct(c) => format!("'{c}'"),
    }
}

fn tokenize(text: &str) -> Result<Vec<(Tok, usize)>, SyntaxError> {
    let mut out = Vec::new();
    let mut line = 1;
    let mut chars = text.chars().peekable();
    while let Some(&c) = chars.peek() {
        match c {
            '\n' => {
                line += 1;
                chars.next();
            }
            c if c.is_whitespace() => {
                chars.next();
            }
            '#' => {
                while chars.peek().is_some_and(|&c| c != '\n') {
                    chars.next();
                }
            }
            '{' | '}' | '<' | '>' | '[' | ']' | ':' | ';' | ',' => {
                out.push((Tok::Punct(c), line));
                chars.next();
            }
            '"' | '\'' => {
                let quote = c;
                chars.next();
                let start = line;
                let mut s = String::new();
                loop {
                    match chars.next() {
                        None | Some('\n') => return Err(SyntaxError { line: start, message: "unterminated string".to_string() }),
                        Some(c) if c == quote => break,
                        Some('\\') => match chars.next() {
                            Some('n') => s.push('\n'),
                            Some('t') => s.push('\t'),
                            Some('r') => s.push('\r'),
                            Some(c @ ('\\' | '\'' | '"')) => s.push(c),
                            other => {
                                return Err(SyntaxError {
                                    line,
                                    message: format!("unsupported escape '\\{}' in a string", other.unwrap_or(' ')),
                                })
                            }
                        },
                        Some(c) => s.push(c),
                    }
                }
                out.push((Tok::String(s), line));
            }
            c if c.is_ascii_digit() || c == '-' || c == '+' || c == '.' => {
                let mut n = String::new();
                while let Some(&c) = chars.peek() {
                    if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+' | '_') {
                        // A sign is part of a number only at its start or after an exponent.
                        if (c == '-' || c == '+') && !(n.is_empty() || n.ends_with(['e', 'E'])) {
                            break;
                        }
                        n.push(c);
                        chars.next();
                    } else {
                        break;
                    }
                }
                out.push((Tok::Number(n), line));
            }
            c if c.is_alphabetic() || c == '_' => {
                let mut i = String::new();
                while let Some(&c) = chars.peek() {
                    if c.is_alphanumeric() || c == '_' || c == '.' {
                        i.push(c);
                        chars.next();
                    } else {
                        break;
                    }
                }
                out.push((Tok::Ident(i), line));
            }
            c => {
                return Err(SyntaxError { line, message: format!("unexpected character {:?}", c) });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(m: &Message) -> Vec<&str> {
        m.fields.iter().map(|f| f.name.as_str()).collect()
    }

    #[test]
    fn reads_triton_style_config() {
        let m = parse(
            r#"
            name: "resnet"   # a comment
            platform: 'tensorrt_plan'
            max_batch_size: 8
            input [
              { name: "x", data_type: TYPE_FP32, dims: [ 3, -1, 224 ] }
            ]
            dynamic_batching { preferred_batch_size: [4, 8]; max_queue_delay_microseconds: 100 }
            instance_group < count: 2 kind: KIND_CPU >
            "#,
        )
        .unwrap();
        assert_eq!(names(&m), ["name", "platform", "max_batch_size", "input", "dynamic_batching", "instance_group"]);
        assert_eq!(m.fields[0].value, Value::String("resnet".into()));
        assert_eq!(m.fields[2].line, 4);
        let Value::Message(input) = &m.fields[3].value else { panic!("input is a message") };
        assert_eq!(names(input), ["name", "data_type", "dims", "dims", "dims"]);
        assert_eq!(input.fields[4].value, Value::Number("224".into()));
        assert_eq!(input.fields[3].value, Value::Number("-1".into()));
        let Value::Message(db) = &m.fields[4].value else { panic!("dynamic_batching is a message") };
        assert_eq!(names(db), ["preferred_batch_size", "preferred_batch_size", "max_queue_delay_microseconds"]);
    }

    #[test]
    fn empty_lists_and_messages() {
        let m = parse("dims: [] version_policy: { all { } }").unwrap();
        assert_eq!(names(&m), ["version_policy"]);
    }

    #[test]
    fn errors_name_the_line() {
        for (text, line, needle) in [
            ("name: \"x\"\nmax_batch_size 4", 2, "expected ':' or '{'"),
            ("input {\n name: \"x\"\n", 2, "missing '}'"),
            ("name: \"abc\n\"", 1, "unterminated string"),
            ("a: [1, 2\n", 1, "expected ',' or ']'"),
            ("a: }", 1, "expected a value"),
            ("a: 1 }", 1, "expected a field name"),
            ("a: @", 1, "unexpected character"),
        ] {
            let e = parse(text).unwrap_err();
            assert_eq!(e.line, line, "{text:?}: {e}");
            assert!(e.message.contains(needle), "{text:?}: {e}");
        }
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        let text = "a { ".repeat(100_000);
        let e = parse(&text).unwrap_err();
        assert!(e.message.contains("nested deeper"), "{e}");
    }
}
