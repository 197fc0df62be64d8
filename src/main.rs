fn main() {
    std::process::exit(kerntax::cli::main());
}
