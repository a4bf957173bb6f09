//! `sbx-shell schema`: the JSON Schema of config files and profiles.

use crate::sys::exit::Failure;

pub fn main() -> Result<u8, Failure> {
    let schema = serde_json::to_string_pretty(&crate::policy::config::schema())?;
    crate::sys::say::write_stdout(format!("{schema}\n").as_bytes())
}
