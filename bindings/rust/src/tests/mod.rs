//! Unit tests of the binding, against the real library. The harness runs
//! tests in parallel threads of one process: each test uses tags of its own
//! (named after it), so that figures that must be exact are those of a tag
//! no other thread touches.

mod future;
mod pressure;
mod prof;
mod report;
mod tag;

use crate::Tag;

/// A tag no other test uses: created here, under a name of the test's.
fn fresh_tag(name: &str) -> Tag {
    let full = format!("rust-unit/{}", name);
    assert_eq!(Tag::lookup(&full), None, "tag {} used by two tests", full);
    Tag::create(&full).expect("create a test tag")
}

/// Whether `s` is exactly one JSON value (RFC 8259's grammar, minimally:
/// strings are scanned for escapes, numbers for their characters), with
/// white space around it.
fn is_json(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    value(b, &mut i) && {
        skip_ws(b, &mut i);
        i == b.len()
    }
}

fn skip_ws(b: &[u8], i: &mut usize) {
    while *i < b.len() && matches!(b[*i], b' ' | b'\t' | b'\n' | b'\r') {
        *i += 1;
    }
}

fn eat(b: &[u8], i: &mut usize, c: u8) -> bool {
    skip_ws(b, i);
    if *i < b.len() && b[*i] == c {
        *i += 1;
        true
    } else {
        false
    }
}

fn value(b: &[u8], i: &mut usize) -> bool {
    skip_ws(b, i);
    if *i >= b.len() {
        return false;
    }
    match b[*i] {
        b'{' => members(b, i, b'}', true),
        b'[' => members(b, i, b']', false),
        b'"' => string(b, i),
        b't' => literal(b, i, b"true"),
        b'f' => literal(b, i, b"false"),
        b'n' => literal(b, i, b"null"),
        b'-' | b'0'..=b'9' => {
            let start = *i;
            while *i < b.len() && matches!(b[*i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9') {
                *i += 1;
            }
            *i > start
        }
        _ => false,
    }
}

/// An object (keyed) or an array, from its opening bracket.
fn members(b: &[u8], i: &mut usize, close: u8, keyed: bool) -> bool {
    *i += 1;
    if eat(b, i, close) {
        return true;
    }
    loop {
        if keyed {
            skip_ws(b, i);
            if !(string(b, i) && eat(b, i, b':')) {
                return false;
            }
        }
        if !value(b, i) {
            return false;
        }
        if eat(b, i, close) {
            return true;
        }
        if !eat(b, i, b',') {
            return false;
        }
    }
}

fn string(b: &[u8], i: &mut usize) -> bool {
    if *i >= b.len() || b[*i] != b'"' {
        return false;
    }
    *i += 1;
    while *i < b.len() {
        match b[*i] {
            b'"' => {
                *i += 1;
                return true;
            }
            b'\\' => *i += 2,
            c if c < 0x20 => return false,
            _ => *i += 1,
        }
    }
    false
}

fn literal(b: &[u8], i: &mut usize, word: &[u8]) -> bool {
    if b[*i..].starts_with(word) {
        *i += word.len();
        true
    } else {
        false
    }
}

#[test]
fn the_json_checker_accepts_json_and_refuses_the_rest() {
    assert!(is_json(
        r#"{"a": [1, -2.5e3, "x\"y", true, null], "b": {}}"#
    ));
    assert!(!is_json(r#"{"a": 1,}"#));
    assert!(!is_json(r#"{"a": 1} {"#));
    assert!(!is_json(r#"["unterminated]"#));
}
