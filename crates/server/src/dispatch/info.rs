//! One section of the `INFO` text ([`InfoSection`]): what the table's section writers fill
//! (the sections themselves are in `cmd::info` and the engine's commands).

use std::fmt::{Display, Write as _};

/// One section of the `INFO` text being written: `# Title` then `key:value` lines.
#[derive(Debug)]
pub struct InfoSection {
    text: String,
}

impl InfoSection {
    pub(crate) fn new(name: &str) -> InfoSection {
        let mut text = String::from("# ");
        let mut chars = name.chars();
        if let Some(first) = chars.next() {
            text.extend(first.to_uppercase());
            text.push_str(chars.as_str());
        }
        text.push_str("\r\n");
        InfoSection { text }
    }

    /// Appends `key:value`. CR and LF in the value are written as spaces.
    pub fn field(&mut self, key: &str, value: impl Display) -> &mut InfoSection {
        let start = self.text.len();
        let _ = write!(self.text, "{key}:{value}");
        if self.text[start..].contains(['\r', '\n']) {
            let line = self.text.split_off(start).replace(['\r', '\n'], " ");
            self.text.push_str(&line);
        }
        self.text.push_str("\r\n");
        self
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.text
    }
}
