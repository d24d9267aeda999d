//! Tokens of the ONC RPC language. Comments (`/* */`, `//`) and `%` pass-through lines vanish here.

use crate::diag::{Diagnostic, Pos, Source};

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Tok {
    Ident(String),
    /// A non-negative literal; the sign is a separate `-` token.
    Num(u64),
    Punct(char),
    Eof,
}

impl Tok {
    pub(crate) fn describe(&self) -> String {
        match self {
            Tok::Ident(s) => format!("'{s}'"),
            Tok::Num(n) => format!("number {n}"),
            Tok::Punct(c) => format!("'{c}'"),
            Tok::Eof => "end of file".to_string(),
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Token {
    pub tok: Tok,
    pub pos: Pos,
}

pub(crate) fn lex(src: &Source) -> Result<Vec<Token>, Diagnostic> {
    let chars: Vec<char> = src.text.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line, mut col) = (0usize, 1u32, 1u32);
    let mut line_start = true;
    macro_rules! bump {
        () => {{
            if chars[i] == '\n' {
                line += 1;
                col = 1;
                line_start = true;
            } else {
                col += 1;
            }
            i += 1;
        }};
    }
    while i < chars.len() {
        let c = chars[i];
        let pos = Pos { line, column: col };
        if c.is_whitespace() {
            bump!();
            continue;
        }
        if line_start && c == '%' {
            while i < chars.len() && chars[i] != '\n' {
                bump!();
            }
            continue;
        }
        if line_start && c == '#' {
            return Err(src.diag(pos, "preprocessor directives are not supported (use `const` for constants)"));
        }
        line_start = false;
        if c == '/' && chars.get(i + 1) == Some(&'*') {
            bump!();
            bump!();
            loop {
                if i >= chars.len() {
                    return Err(src.diag(pos, "unterminated comment"));
                }
                if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    bump!();
                    bump!();
                    break;
                }
                bump!();
            }
            continue;
        }
        if c == '/' && chars.get(i + 1) == Some(&'/') {
            while i < chars.len() && chars[i] != '\n' {
                bump!();
            }
            continue;
        }
        if c.is_ascii_alphabetic() || c == '_' {
            let mut s = String::new();
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                s.push(chars[i]);
                bump!();
            }
            out.push(Token { tok: Tok::Ident(s), pos });
            continue;
        }
        if c.is_ascii_digit() {
            let mut s = String::new();
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                s.push(chars[i]);
                bump!();
            }
            let parsed = if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
                u64::from_str_radix(hex, 16)
            } else if s.len() > 1 && s.starts_with('0') {
                u64::from_str_radix(&s[1..], 8)
            } else {
                s.parse::<u64>()
            };
            match parsed {
                Ok(n) => out.push(Token { tok: Tok::Num(n), pos }),
                Err(_) => return Err(src.diag(pos, format!("malformed number '{s}'"))),
            }
            continue;
        }
        if "{}()[]<>;,=:*-".contains(c) {
            out.push(Token { tok: Tok::Punct(c), pos });
            bump!();
            continue;
        }
        return Err(src.diag(pos, format!("unexpected character '{c}'")));
    }
    out.push(Token { tok: Tok::Eof, pos: Pos { line, column: col } });
    Ok(out)
}
