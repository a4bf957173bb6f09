//! The `sbx-shell` binary: everything lives in the library; this only maps the outcome to
//! an exit code.

fn main() -> std::process::ExitCode {
    sbx_shell::main_entry()
}
