mod cli;
mod nontty;
mod policy;
mod support;
mod terminal;
mod tmux;
