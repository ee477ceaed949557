//! The `urlseen` binary: the command lives in the library ([`urlseen::run`]), which the Python
//! wheel's `urlseen` command runs too.

use std::process::ExitCode;

fn main() -> ExitCode {
    ExitCode::from(urlseen::run(std::env::args_os()))
}
