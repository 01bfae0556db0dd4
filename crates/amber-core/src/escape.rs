//! How a name reads on a terminal or in a report.
//!
//! A name in a pool is any bytes but '/' and NUL (as on every Linux file
//! system), so it may be invalid UTF-8 or hold a newline or an escape
//! sequence; printed raw it could break a listing into lines that look
//! like other entries, or drive the terminal. Every place that shows a
//! name, a symlink target or a path shows it through [`Escaped`]:
//! printable UTF-8 as it is, a backslash as `\\`, tab, newline and
//! carriage return as `\t`, `\n`, `\r`, and every other control character
//! (C0, DEL, C1) and every byte that is not UTF-8 as `\xNN` — C-style
//! escapes, as `ls -b` prints (spaces left as they are), so one name is
//! one unambiguous line.

use std::fmt::{self, Write};
use std::path::Path;

/// Bytes shown with C-style escapes (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Escaped<'a>(pub &'a [u8]);

impl<'a> Escaped<'a> {
    /// A local path, escaped the same way as names in the pool.
    pub fn path(path: &'a Path) -> Escaped<'a> {
        Escaped(path.as_os_str().as_encoded_bytes())
    }
}

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for chunk in self.0.utf8_chunks() {
            for c in chunk.valid().chars() {
                match c {
                    '\\' => f.write_str("\\\\")?,
                    '\t' => f.write_str("\\t")?,
                    '\n' => f.write_str("\\n")?,
                    '\r' => f.write_str("\\r")?,
                    c if c.is_control() => {
                        let mut buf = [0u8; 4];
                        hex(f, c.encode_utf8(&mut buf).as_bytes())?;
                    }
                    c => f.write_char(c)?,
                }
            }
            hex(f, chunk.invalid())?;
        }
        Ok(())
    }
}

fn hex(f: &mut fmt::Formatter<'_>, bytes: &[u8]) -> fmt::Result {
    bytes.iter().try_for_each(|b| write!(f, "\\x{b:02x}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(bytes: &[u8]) -> String {
        Escaped(bytes).to_string()
    }

    #[test]
    fn printable_utf8_is_unchanged() {
        assert_eq!(shown(b"plain name.txt"), "plain name.txt");
        assert_eq!(
            shown("caf\u{e9} \u{1f980}".as_bytes()),
            "caf\u{e9} \u{1f980}"
        );
    }

    #[test]
    fn controls_backslashes_and_bad_bytes_are_escaped() {
        assert_eq!(shown(b"a\nb\tc\rd"), "a\\nb\\tc\\rd");
        assert_eq!(shown(b"back\\slash"), "back\\\\slash");
        assert_eq!(shown(b"\x1b[31mred\x7f"), "\\x1b[31mred\\x7f");
        assert_eq!(shown(b"bad\xff\xfe"), "bad\\xff\\xfe");
        // A C1 control (U+0085) is valid UTF-8 but not printable.
        assert_eq!(shown("x\u{85}y".as_bytes()), "x\\xc2\\x85y");
        // A truncated sequence before a valid character.
        assert_eq!(shown(b"\xe2\x82z"), "\\xe2\\x82z");
    }

    #[test]
    fn distinct_names_stay_distinct() {
        // The escape of a backslash keeps "\x41" (four bytes) apart from "A".
        assert_ne!(shown(b"\\x41"), shown(b"A"));
        assert_ne!(shown(b"\\n"), shown(b"\n"));
    }

    #[test]
    fn paths_escape_like_names() {
        use std::os::unix::ffi::OsStrExt;
        let p = Path::new(std::ffi::OsStr::from_bytes(b"/tmp/x\ny\xff"));
        assert_eq!(Escaped::path(p).to_string(), "/tmp/x\\ny\\xff");
    }
}
