//! What keeps the writable trees from carrying code out of the sandbox: the git
//! configuration keys a program may write (`gitconfig`), what a git directory is
//! (`gitdir`), the repositories and the places that would run code (`repos`, `planted`),
//! and the names the guard judges (`names`).

pub mod gitdir;
pub mod gitstate;
pub mod names;
pub mod planted;
pub mod repos;
