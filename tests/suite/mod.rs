mod cli;
mod network;
mod nontty;
mod policy;
mod sandbox;
mod support;
mod terminal;
mod tmux;
