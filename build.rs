//! Regenerates include/ember.h from src/ffi so the header can never drift from the code.
//! CI rebuilds and fails if the committed header changed.

fn main() {
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    let crate_dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let config = cbindgen::Config::from_file(format!("{crate_dir}/cbindgen.toml")).expect("cbindgen.toml is readable");
    match cbindgen::generate_with_config(&crate_dir, config) {
        Ok(bindings) => {
            bindings.write_to_file(format!("{crate_dir}/include/ember.h"));
        }
        Err(e) => panic!("cbindgen could not generate include/ember.h: {e}"),
    }
}
