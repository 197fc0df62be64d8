//! One libFuzzer binary for every harness of `kerntax::fuzz`, chosen by
//! KERNTAX_FUZZ_HARNESS (run.sh sets it): one instrumented build, not one
//! per harness.
#![no_main]

use std::sync::OnceLock;

fn chosen() -> fn(&[u8]) {
    static RUN: OnceLock<fn(&[u8])> = OnceLock::new();
    *RUN.get_or_init(|| {
        let name = std::env::var("KERNTAX_FUZZ_HARNESS").unwrap_or_default();
        match kerntax::fuzz::harness(&name) {
            Some(h) => h.run,
            None => {
                let names: Vec<&str> = kerntax::fuzz::HARNESSES.iter().map(|h| h.name).collect();
                eprintln!("KERNTAX_FUZZ_HARNESS={name:?}: not one of {names:?}");
                std::process::exit(2);
            }
        }
    })
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| chosen()(data));
