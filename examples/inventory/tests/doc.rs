//! `docs/onc-example.md` quotes this project's files: every code block after a
//! `<!-- snippet: PATH -->` line (the whole file) or `<!-- snippet: PATH#NAME -->` line (the
//! lines between `// ANCHOR: NAME` and `// ANCHOR_END: NAME` there) must be exactly what the
//! file holds, so the documentation cannot drift from code that compiles and runs.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The lines of `path` a snippet quotes: all of them, or those between the anchor lines of
/// `name`.
fn quoted(path: &str, name: Option<&str>) -> String {
    let text = std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
    let Some(name) = name else { return text };
    let (begin, end) = (format!("// ANCHOR: {name}"), format!("// ANCHOR_END: {name}"));
    let lines: Vec<&str> = text.lines().collect();
    let from = lines.iter().position(|l| l.trim() == begin).unwrap_or_else(|| panic!("{path}: no `{begin}`"));
    let to = lines.iter().position(|l| l.trim() == end).unwrap_or_else(|| panic!("{path}: no `{end}`"));
    assert!(from < to, "{path}: `{end}` before `{begin}`");
    lines[from + 1..to].iter().map(|l| format!("{l}\n")).collect()
}

#[test]
fn the_documentation_quotes_the_example_as_it_is() {
    let doc_path = root().join("docs/onc-example.md");
    let doc = std::fs::read_to_string(&doc_path).unwrap();
    let lines: Vec<&str> = doc.lines().collect();
    let mut checked = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(target) = line.strip_prefix("<!-- snippet: ").and_then(|l| l.strip_suffix(" -->")) else {
            continue;
        };
        let (path, name) = match target.split_once('#') {
            Some((p, n)) => (p, Some(n)),
            None => (target, None),
        };
        let fence = lines.get(i + 1).copied().unwrap_or_default();
        assert!(fence.starts_with("```"), "docs/onc-example.md:{}: a code block follows a snippet line", i + 2);
        let len = lines[i + 2..].iter().position(|l| *l == "```").expect("the code block ends");
        let block: String = lines[i + 2..i + 2 + len].iter().map(|l| format!("{l}\n")).collect();
        assert_eq!(
            block,
            quoted(path, name),
            "docs/onc-example.md:{}: the quotation of {target} differs from the file",
            i + 1
        );
        checked.push(target.to_string());
    }
    // Every file the example is made of is quoted.
    for part in [
        "inventory.x",
        "build.rs",
        "src/lib.rs#service",
        "async_service.rs#async_service",
        "inventory-server.rs#serve",
        "inventory-client.rs#session",
    ] {
        assert!(checked.iter().any(|c| c.ends_with(part)), "docs/onc-example.md quotes no {part}: {checked:?}");
    }
}
