//! The snapshot's JSON read straight from its bytes: the top level split into the
//! `partitions` array (read into `Columns` by `scan_partitions.rs`) and the rest
//! (handed back as a small document for msgspec's typed decoder, which checks it as it
//! checks the whole file).
//!
//! Strict by design: anything outside the plain form the collectors write (an escape
//! in a string, an integer of 19 digits or more, a float, a duplicate key, nesting past
//! `MAX_DEPTH`) is refused with None, and the caller then takes the msgspec path and,
//! on a refusal there, the checking walker, which words the error. So this reader can
//! only be stricter than the reference, never more lenient. No recursion anywhere.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::columns::Columns;
use crate::scan_partitions;

pub const NONE: u32 = u32::MAX;
const MAX_DEPTH: usize = 512;

/// A multiply-rotate hash over 8 bytes at a time: short keys (topic names, dir paths)
/// hashed millions of times (FNV a byte at a time was a fifth of the scan).
#[derive(Default)]
pub struct Fnv(u64);

const K: u64 = 0x9e37_79b9_7f4a_7c15;

impl Fnv {
    fn mix(&mut self, x: u64) {
        self.0 = (self.0 ^ x).wrapping_mul(K).rotate_left(29);
    }
}

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.mix(u64::from_le_bytes(c.try_into().unwrap_or_default()));
        }
        let mut last = [0u8; 8];
        last[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
        self.mix(u64::from_le_bytes(last));
    }
    fn write_usize(&mut self, n: usize) {
        self.mix(n as u64);
    }
    fn write_i64(&mut self, n: i64) {
        self.mix(n as u64);
    }
}

pub type FnvMap<K, V> = HashMap<K, V, BuildHasherDefault<Fnv>>;

pub struct Scan<'a> {
    pub b: &'a [u8],
    pub i: usize,
}

impl<'a> Scan<'a> {
    pub fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.b.get(self.i) {
            self.i += 1;
        }
    }

    pub fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.b.get(self.i).copied()
    }

    pub fn eat(&mut self, c: u8) -> Option<()> {
        (self.peek()? == c).then(|| self.i += 1)
    }

    /// The byte after a member or element: `,` (true) or `close` (false).
    pub fn more(&mut self, close: u8) -> Option<bool> {
        match self.peek()? {
            b',' => {
                self.i += 1;
                Some(true)
            }
            c if c == close => {
                self.i += 1;
                Some(false)
            }
            _ => None,
        }
    }

    /// A string without escapes or control characters: its raw bytes (not yet
    /// checked as UTF-8).
    pub fn string(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        let start = self.i;
        loop {
            match *self.b.get(self.i)? {
                b'"' => break,
                b'\\' => return None,
                c if c < 0x20 => return None,
                _ => self.i += 1,
            }
        }
        self.i += 1;
        Some(&self.b[start..self.i - 1])
    }

    /// A non-negative integer of at most 18 digits, or exactly -1 where `minus_one`.
    pub fn int(&mut self, minus_one: bool) -> Option<i64> {
        self.ws();
        let negative = self.b.get(self.i) == Some(&b'-');
        if negative {
            if !minus_one {
                return None;
            }
            self.i += 1;
        }
        let start = self.i;
        let mut value: i64 = 0;
        while let Some(&c @ b'0'..=b'9') = self.b.get(self.i) {
            value = value * 10 + i64::from(c - b'0');
            self.i += 1;
            if self.i - start > 18 {
                return None;
            }
        }
        let digits = self.i - start;
        if digits == 0 || (digits > 1 && self.b[start] == b'0') {
            return None;
        }
        if let Some(b'.' | b'e' | b'E') = self.b.get(self.i) {
            return None;
        }
        match (negative, value) {
            (false, v) => Some(v),
            (true, 1) => Some(-1),
            _ => None,
        }
    }

    /// Past `text` if it comes next, as it stands (no whitespace before it).
    pub fn lit(&mut self, text: &[u8]) -> bool {
        let found = self.b[self.i..].starts_with(text);
        if found {
            self.i += text.len();
        }
        found
    }

    pub fn null(&mut self) -> bool {
        self.ws();
        let found = self.b[self.i..].starts_with(b"null");
        if found {
            self.i += 4;
        }
        found
    }

    /// Past one value of any kind, checking only that strings close and brackets pair
    /// up (msgspec checks the rest when it decodes the span).
    pub fn skip(&mut self) -> Option<()> {
        let mut stack: Vec<u8> = Vec::new();
        loop {
            self.ws();
            match *self.b.get(self.i)? {
                b'"' => {
                    self.i += 1;
                    loop {
                        match *self.b.get(self.i)? {
                            b'\\' => self.i += 2,
                            b'"' => break,
                            _ => self.i += 1,
                        }
                    }
                    self.i += 1;
                }
                c @ (b'{' | b'[') => {
                    stack.push(if c == b'{' { b'}' } else { b']' });
                    if stack.len() > MAX_DEPTH {
                        return None;
                    }
                    self.i += 1;
                    continue;
                }
                c @ (b'}' | b']') => {
                    if stack.pop()? != c {
                        return None;
                    }
                    self.i += 1;
                }
                b',' | b':' => {
                    if stack.is_empty() {
                        return None;
                    }
                    self.i += 1;
                    continue;
                }
                _ => {
                    while let Some(&c) = self.b.get(self.i) {
                        if matches!(c, b',' | b':' | b'{' | b'}' | b'[' | b']' | b'"' | b' ' | b'\t' | b'\n' | b'\r') {
                            break;
                        }
                        self.i += 1;
                    }
                }
            }
            if stack.is_empty() {
                return Some(());
            }
        }
    }
}

/// The document split: every top-level member but `partitions` as a JSON object of
/// its own (`"partitions":[]` in its place), and the partitions read into columns.
pub fn read(b: &[u8]) -> Option<(Vec<u8>, Columns)> {
    let mut s = Scan { b, i: 0 };
    let mut header: Vec<u8> = Vec::with_capacity(1 << 16);
    header.push(b'{');
    let mut columns = None;
    s.eat(b'{')?;
    if s.peek()? != b'}' {
        loop {
            let key = s.string()?;
            s.eat(b':')?;
            if key == b"partitions" {
                if columns.is_some() {
                    return None;
                }
                columns = Some(scan_partitions::partitions(&mut s)?);
            } else {
                s.ws();
                let start = s.i;
                s.skip()?;
                header.push(b'"');
                header.extend_from_slice(key);
                header.extend_from_slice(b"\":");
                header.extend_from_slice(&b[start..s.i]);
                header.push(b',');
            }
            if !s.more(b'}')? {
                break;
            }
        }
    } else {
        s.i += 1;
    }
    s.ws();
    if s.i != b.len() {
        return None;
    }
    header.extend_from_slice(b"\"partitions\":[]}");
    Some((header, columns?))
}
