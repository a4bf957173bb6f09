mod cli;
mod nontty;
mod support;
mod terminal;
mod tmux;
