//! [`Parse`], a cursor over the arguments of one command.
//!
//! A handler pulls its arguments in order and ends with [`Parse::finish`], so that leftover
//! arguments are an error and never silently ignored:
//!
//! ```
//! use bytes::Bytes;
//! use urlseen_server::{CommandError, Parse};
//!
//! let mut args = Parse::new("bf.reserve", vec![
//!     Bytes::from("jobs"), Bytes::from("0.01"), Bytes::from("1000"), Bytes::from("NONSCALING"),
//! ]);
//! let key = args.next_bytes()?;
//! let error_rate = args.next_f64()?;
//! let capacity = args.next_int()?;
//! let nonscaling = args.next_if_keyword("NONSCALING");
//! args.finish()?;
//! assert_eq!((&key[..], error_rate, capacity, nonscaling), (&b"jobs"[..], 0.01, 1000, true));
//! # Ok::<(), CommandError>(())
//! ```

use bytes::Bytes;

use crate::error::CommandError;
use crate::frame::parse_i64;

/// The `ERR` for an argument that must be UTF-8 text and is not.
pub const NOT_UTF8: &str = "ERR argument is not valid UTF-8";

/// The arguments of one command, after its name (and subcommand name).
#[derive(Debug)]
pub struct Parse {
    command: &'static str,
    args: std::vec::IntoIter<Bytes>,
}

impl Parse {
    /// A cursor over `args` for the command whose full name (as arity errors spell it) is
    /// `command`.
    pub fn new(command: &'static str, args: Vec<Bytes>) -> Parse {
        Parse { command, args: args.into_iter() }
    }

    /// The command's full name: `ping`, `client|setname`.
    pub fn command(&self) -> &'static str {
        self.command
    }

    /// How many arguments are left.
    pub fn remaining(&self) -> usize {
        self.args.len()
    }

    /// Whether no argument is left.
    pub fn is_empty(&self) -> bool {
        self.args.len() == 0
    }

    /// The next argument, without taking it.
    pub fn peek(&self) -> Option<&Bytes> {
        self.args.as_slice().first()
    }

    /// The next argument, as raw bytes.
    ///
    /// # Errors
    /// `ERR wrong number of arguments for '<command>' command` when there is none.
    pub fn next_bytes(&mut self) -> Result<Bytes, CommandError> {
        self.args.next().ok_or(CommandError::WrongArity { command: self.command.into() })
    }

    /// The next argument, as UTF-8 text.
    ///
    /// # Errors
    /// As [`Parse::next_bytes`], and [`NOT_UTF8`] for bytes that are not UTF-8.
    pub fn next_string(&mut self) -> Result<String, CommandError> {
        String::from_utf8(self.next_bytes()?.to_vec()).map_err(|_| CommandError::custom(NOT_UTF8))
    }

    /// The next argument, as a canonical decimal `i64` (Redis' `string2ll`: no `+`, no
    /// leading zeros, no spaces).
    ///
    /// # Errors
    /// As [`Parse::next_bytes`], and `ERR value is not an integer or out of range`.
    pub fn next_int(&mut self) -> Result<i64, CommandError> {
        parse_i64(&self.next_bytes()?).ok_or(CommandError::NotInteger)
    }

    /// The next argument, as a finite or infinite `f64` (not NaN), like Redis' float arguments.
    ///
    /// # Errors
    /// As [`Parse::next_bytes`], and `ERR value is not a valid float`.
    pub fn next_f64(&mut self) -> Result<f64, CommandError> {
        parse_f64(&self.next_bytes()?).ok_or(CommandError::NotFloat)
    }

    /// Takes the next argument if it is `keyword`, compared ASCII case-insensitively.
    pub fn next_if_keyword(&mut self, keyword: &str) -> bool {
        let matches = self.peek().is_some_and(|a| a.eq_ignore_ascii_case(keyword.as_bytes()));
        if matches {
            self.args.next();
        }
        matches
    }

    /// The arguments not taken yet.
    pub fn into_rest(self) -> std::vec::IntoIter<Bytes> {
        self.args
    }

    /// Ends parsing.
    ///
    /// # Errors
    /// `ERR syntax error` when arguments are left.
    pub fn finish(self) -> Result<(), CommandError> {
        if self.is_empty() { Ok(()) } else { Err(CommandError::Syntax) }
    }
}

/// A float argument as Redis reads one: finite or infinite, not NaN, no surrounding spaces.
pub fn parse_f64(arg: &[u8]) -> Option<f64> {
    std::str::from_utf8(arg)
        .ok()
        .filter(|s| !s.is_empty() && !s.starts_with(char::is_whitespace))
        .filter(|s| !s.ends_with(char::is_whitespace))
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|x| !x.is_nan())
}

impl Iterator for Parse {
    type Item = Bytes;

    fn next(&mut self) -> Option<Bytes> {
        self.args.next()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.args.size_hint()
    }
}

impl ExactSizeIterator for Parse {}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Parse {
        Parse::new("cmd", args.iter().map(|a| Bytes::copy_from_slice(a.as_bytes())).collect())
    }

    #[test]
    fn typed_arguments_and_their_errors() {
        let mut a = p(&["12", "-3", "x", "1.5", "inf", "nan", " 1"]);
        assert_eq!(a.next_int(), Ok(12));
        assert_eq!(a.next_int(), Ok(-3));
        assert_eq!(a.next_int(), Err(CommandError::NotInteger));
        assert_eq!(a.next_f64(), Ok(1.5));
        assert_eq!(a.next_f64(), Ok(f64::INFINITY));
        assert_eq!(a.next_f64(), Err(CommandError::NotFloat));
        assert_eq!(a.next_f64(), Err(CommandError::NotFloat));
        assert_eq!(a.next_bytes(), Err(CommandError::WrongArity { command: "cmd".into() }));
        assert_eq!(a.finish(), Ok(()));
    }

    #[test]
    fn leftovers_are_a_syntax_error() {
        let mut a = p(&["a", "extra"]);
        assert_eq!(a.next_string().as_deref(), Ok("a"));
        assert_eq!(a.finish(), Err(CommandError::Syntax));
    }

    #[test]
    fn keywords_are_case_insensitive_and_optional() {
        let mut a = p(&["nx", "rest"]);
        assert!(!a.next_if_keyword("XX"));
        assert!(a.next_if_keyword("NX"));
        assert_eq!(a.remaining(), 1);
        assert_eq!(a.into_rest().count(), 1);
        let mut a = Parse::new("cmd", vec![Bytes::from_static(&[0xff])]);
        assert_eq!(a.next_string(), Err(CommandError::custom(NOT_UTF8)));
    }
}
