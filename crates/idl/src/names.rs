//! Turning ONC RPC names into idiomatic Rust names.

const KEYWORDS: &[&str] = &[
    "as", "break", "const", "continue", "else", "enum", "extern", "false", "fn", "for", "if", "impl", "in", "let",
    "loop", "match", "mod", "move", "mut", "pub", "ref", "return", "static", "struct", "trait", "true", "type",
    "unsafe", "use", "where", "while", "async", "await", "dyn", "abstract", "become", "box", "do", "final", "macro",
    "override", "priv", "typeof", "unsized", "virtual", "yield", "try", "gen", "union",
];
const NOT_RAW: &[&str] = &["self", "Self", "super", "crate"];

fn words(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let chars: Vec<char> = s.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if c == '_' {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            continue;
        }
        let prev = if i > 0 { chars[i - 1] } else { '_' };
        let next_lower = chars.get(i + 1).is_some_and(|n| n.is_ascii_lowercase());
        // A boundary at lower->Upper ("fooBar") and at the last capital of an acronym ("XDRType").
        if c.is_ascii_uppercase()
            && !cur.is_empty()
            && (prev.is_ascii_lowercase() || prev.is_ascii_digit() || (prev.is_ascii_uppercase() && next_lower))
        {
            out.push(std::mem::take(&mut cur));
        }
        cur.push(c);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn escape(s: String) -> String {
    if NOT_RAW.contains(&s.as_str()) {
        format!("{s}_")
    } else if KEYWORDS.contains(&s.as_str()) {
        format!("r#{s}")
    } else {
        s
    }
}

/// `lab_args` -> `LabArgs`, `XDR_TYPE` -> `XdrType`.
pub fn camel(s: &str) -> String {
    let mut out = String::new();
    for w in words(s) {
        let mut cs = w.chars();
        if let Some(f) = cs.next() {
            out.push(f.to_ascii_uppercase());
            out.extend(cs.map(|c| c.to_ascii_lowercase()));
        }
    }
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, 'X');
    }
    escape(out)
}

/// `fooBar` -> `foo_bar`, `MINUS` -> `minus`.
pub fn snake(s: &str) -> String {
    let out = words(s).iter().map(|w| w.to_ascii_lowercase()).collect::<Vec<_>>().join("_");
    if out.is_empty() {
        return "x".into();
    }
    escape(out)
}

/// `maxLen` -> `MAX_LEN`.
pub fn screaming(s: &str) -> String {
    let out = words(s).iter().map(|w| w.to_ascii_uppercase()).collect::<Vec<_>>().join("_");
    if out.is_empty() {
        return "X".into();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions() {
        assert_eq!(camel("lab_args"), "LabArgs");
        assert_eq!(camel("XDRType"), "XdrType");
        assert_eq!(camel("LAB_PROG"), "LabProg");
        assert_eq!(camel("self"), "Self_");
        assert_eq!(snake("fooBar"), "foo_bar");
        assert_eq!(snake("MINUS"), "minus");
        assert_eq!(snake("type"), "r#type");
        assert_eq!(snake("self"), "self_");
        assert_eq!(screaming("maxLen"), "MAX_LEN");
    }
}
