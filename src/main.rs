//! The `ctxbench` binary: a thin shell over `ctxbench::main_impl`.

fn main() {
    std::process::exit(ctxbench::main_impl());
}
