//! Malformed `.x` inputs: each must fail with its message at its position, shown with a caret.

use lowlat_idl::{compile_str, IdlError, Lang, Options, Source};

fn first_error(text: &str) -> lowlat_idl::Diagnostic {
    match compile_str(&Source::new("bad.x", text), Lang::Rust, &Options::default()) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(IdlError::Invalid(d)) => d.into_iter().next().expect("at least one diagnostic"),
        Err(e) => panic!("unexpected error kind: {e}"),
    }
}

/// (input, expected message, line, column)
const CASES: &[(&str, &str, u32, u32)] = &[
    // 1. the lexer
    ("struct s { int a; } /* never closed", "unterminated comment", 1, 21),
    ("const A = 12abc;", "malformed number '12abc'", 1, 11),
    ("struct s { int a; }$;", "unexpected character '$'", 1, 20),
    ("#include \"x.h\"\nconst A = 1;", "preprocessor directives are not supported", 1, 1),
    // 2. the parser
    ("struct s { int a }", "expected ';' after the struct member, found '}'", 1, 18),
    ("struct s { quadruple q; };", "'quadruple' (128-bit floating point) is not supported", 1, 12),
    ("struct int { int a; };", "'int' is a reserved word and cannot be used as a struct name", 1, 8),
    ("struct s { string name; };", "a string needs a maximum size", 1, 23),
    ("struct s { opaque data; };", "opaque data needs a size", 1, 23),
    ("struct s { void; };", "a struct member cannot be void", 1, 12),
    ("union u switch (int d) { default: void; case 1: int a; };", "the default arm must come last", 1, 41),
    ("union u switch (int d) { };", "a union needs at least one 'case' arm", 1, 26),
    ("program P { version V { void F(void, int) = 1; } = 1; } = 2;", "'void' must be the only argument", 1, 32),
    ("typedef int x<5;", "expected '>' after the maximum size, found ';'", 1, 16),
    ("foo bar;", "expected a definition (const, typedef, enum, struct, union or program), found 'foo'", 1, 1),
    ("const A = ;", "expected a number or a constant name, found ';'", 1, 11),
    // 3. the checker
    ("struct s {\n  widget w;\n};", "undefined type 'widget'", 2, 3),
    ("struct s { int a; };\nstruct s { int b; };", "'s' is already defined at line 1, column 8", 2, 8),
    ("typedef int v<MAX>;", "undefined constant 'MAX'", 1, 15),
    ("const A = B;\nconst B = A;", "is defined in terms of itself", 1, 11),
    ("struct s { int a; int a; };", "struct s: member 'a' already declared at line 1", 1, 23),
    ("enum e { A = 1, B = 1 };", "enum e: 'B' has value 1, already used by 'A'", 1, 21),
    (
        "struct p { int x; };\nunion u switch (p d) { case 1: int a; };",
        "union u: the discriminant must be int, unsigned int, bool or an enum",
        2,
        17,
    ),
    (
        "enum c { RED = 0 };\nconst BLUE = 4;\nunion u switch (c d) { case BLUE: int a; };",
        "union u: case BLUE is not a member of the discriminant's enum",
        3,
        29,
    ),
    ("union u switch (int d) { case 1: int a; case 1: int b; };", "union u: case 1 already used at line 1", 1, 46),
    (
        "union u switch (unsigned int d) { case -1: int a; };",
        "union u: case -1 is out of range for a unsigned int discriminant",
        1,
        40,
    ),
    (
        "struct a { b inner; };\nstruct b { a outer; };",
        "recursive type 'a' (a -> b -> a) contains itself by value",
        1,
        12,
    ),
    ("struct s { s self_[2]; };", "recursive type 's' (s -> s) contains itself by value", 1, 12),
    (
        "typedef t2 *t1;\ntypedef t1 t2;",
        "recursive type 't1' (t1 -> t2 -> t1) is a typedef that refers to itself",
        1,
        9,
    ),
    ("typedef int x[0];", "a fixed size must be at least 1, got 0", 1, 15),
    ("typedef opaque x<4294967296>;", "size 4294967296 is out of range", 1, 18),
    ("const N = 3;\nstruct s { N x; };", "'N' is not a type", 2, 12),
    ("struct s { int a; };\ntypedef int v<s>;", "'s' is a type, not a constant", 2, 15),
    ("const TRUE = 2;", "'TRUE' is predefined", 1, 7),
    (
        "program P { version V { void F(void) = 1; void G(void) = 1; } = 1; } = 2;",
        "version V: procedure number 1 already used at line 1",
        1,
        58,
    ),
    (
        "program P { version V { void F(void) = 1; } = 1; version W { void F(void) = 1; } = 1; } = 2;",
        "program P: version number 1 already used at line 1",
        1,
        84,
    ),
    ("program P { version V { void F(widget) = 1; } = 1; } = 2;", "undefined type 'widget'", 1, 32),
    (
        "struct foo_bar { int a; };\nstruct fooBar { int b; };",
        "'fooBar' and 'foo_bar' both become the Rust name `FooBar`",
        2,
        8,
    ),
    // 4. Rust names that would clash
    (
        "union u switch (int d) { case 1: int v2; case 2: void; };",
        "union u: 'case 2' and 'v2' both become the Rust name `V2`; rename one",
        1,
        47,
    ),
    ("struct ok { int a; };", "'ok' becomes `Ok`, which the generated code takes from Rust's prelude", 1, 8),
    (
        "program P { version V { void WITH(void) = 1; } = 1; } = 2;",
        "version V: 'WITH' and the client's own `with` both become the Rust name `with`",
        1,
        30,
    ),
    (
        "program P { version V { void PROGRAM(void) = 1; } = 1; } = 2;",
        "version V: 'PROGRAM' and the version's own `PROGRAM` both become the Rust name `PROGRAM`",
        1,
        30,
    ),
];

#[test]
fn each_malformed_input_names_its_problem_and_position() {
    assert!(CASES.len() >= 15);
    let mut failures = Vec::new();
    for (i, (text, message, line, column)) in CASES.iter().enumerate() {
        let d = first_error(text);
        if !d.message.contains(message) || d.pos.line != *line || d.pos.column != *column {
            failures.push(format!(
                "case {}: want {line}:{column} {message:?}\n         got {}:{} {:?}",
                i + 1,
                d.pos.line,
                d.pos.column,
                d.message
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn diagnostics_show_file_line_column_the_line_and_a_caret() {
    let d = first_error("const A = 1;\nstruct s {\n\tfloat f;\n\tmystery m;\n};");
    assert_eq!(d.to_string(), "bad.x:4:2: error: undefined type 'mystery'\n4 | \tmystery m;\n  | \t^");
}

#[test]
fn the_checker_reports_every_problem_at_once() {
    let text = "struct a { nope x; };\nstruct b { alsonope y; };\ntypedef int v<MISSING>;";
    match compile_str(&Source::new("bad.x", text), Lang::Rust, &Options::default()) {
        Err(IdlError::Invalid(d)) => {
            let lines: Vec<u32> = d.iter().map(|d| d.pos.line).collect();
            assert_eq!(lines, [1, 2, 3], "{d:?}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn missing_file_and_unknown_language_are_typed_errors() {
    let e = lowlat_idl::compile_file("/nonexistent/x.x", Lang::Rust).unwrap_err();
    assert!(matches!(e, IdlError::Io { .. }), "{e}");
    let e = "cobol".parse::<Lang>().unwrap_err();
    assert_eq!(e.to_string(), "no generator for language 'cobol' (available: rust, c, wireshark)");
    assert_eq!("c".parse::<Lang>().unwrap(), Lang::C);
}

#[test]
fn accepted_extensions_and_inline_types() {
    // rpcgen-style omitted enum values, `struct name` references, inline anonymous types,
    // named procedure arguments and `%` lines all compile.
    let text = "%#include <x.h>\nenum e { A, B, C = 10, D };\nstruct s { struct s *next; enum { X = 1, Y = 2 } kind; };\nprogram P { version V { int F(int a, e b) = 1; } = 1; } = 0x20000001;";
    let files =
        compile_str(&Source::new("ok.x", text), Lang::Rust, &Options::default()).unwrap_or_else(|e| panic!("{e}"));
    let rs = &files[0].contents;
    assert_eq!(files[0].name, "ok.rs");
    assert!(rs.contains("D = 11,"), "{rs}");
    assert!(rs.contains("pub enum SKind"), "{rs}");
    assert!(rs.contains("pub fn f(&self, a: i32, b: super::E)"), "{rs}");
}

mod never_panics {
    use super::*;
    use proptest::prelude::*;

    fn everything_x() -> String {
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../idl/examples/everything.x")).unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// Damaged definitions (characters deleted, replaced, inserted) compile or fail with
        /// diagnostics; the compiler never panics.
        #[test]
        fn damaged_definitions(edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..3, prop::sample::select(vec!['{', '}', ';', '<', '>', '*', '-', '0', 'x', ' ', '/', '%', '\n', 'é'])), 1..6)) {
            let mut text: Vec<char> = everything_x().chars().collect();
            for (at, op, c) in edits {
                let i = at.index(text.len());
                match op {
                    0 => { text.remove(i); }
                    1 => text[i] = c,
                    _ => text.insert(i, c),
                }
            }
            let text: String = text.into_iter().collect();
            if let Err(IdlError::Invalid(d)) = compile_str(&Source::new("m.x", text), Lang::Rust, &Options::default()) {
                prop_assert!(!d.is_empty());
                prop_assert!(d.iter().all(|d| d.pos.line >= 1 && d.pos.column >= 1));
            }
        }

        #[test]
        fn random_text(text in "\\PC{0,200}") {
            let _ = compile_str(&Source::new("r.x", text), Lang::Rust, &Options::default());
        }
    }
}
