//! Regenerates include/ember.h from src/ffi so the header can never drift from the code.
//! CI rebuilds and fails if the committed header changed.
//!
//! On Linux it also gives libember.so the soname libember.so.0, so programs linked against it
//! (and `make install`'s versioned file) follow the usual shared-library versioning.

fn main() {
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    let crate_dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let mut config = cbindgen::Config::from_file(format!("{crate_dir}/cbindgen.toml")).expect("cbindgen.toml is readable");
    config.after_includes = Some(version_macros());
    match cbindgen::generate_with_config(&crate_dir, config) {
        Ok(bindings) => {
            bindings.write_to_file(format!("{crate_dir}/include/ember.h"));
        }
        Err(e) => panic!("cbindgen could not generate include/ember.h: {e}"),
    }
    soname();
}

/// The package version as macros, from Cargo.toml, so the header and the library agree.
fn version_macros() -> String {
    let v = |k: &str| std::env::var(k).expect("cargo sets the package version");
    format!(
        "\n/** The version of Ember this header belongs to; ember_version() gives the loaded library's. */\n\
         #define EMBER_VERSION_MAJOR {}\n#define EMBER_VERSION_MINOR {}\n#define EMBER_VERSION_PATCH {}\n\
         #define EMBER_VERSION_STRING \"{}\"",
        v("CARGO_PKG_VERSION_MAJOR"),
        v("CARGO_PKG_VERSION_MINOR"),
        v("CARGO_PKG_VERSION_PATCH"),
        v("CARGO_PKG_VERSION"),
    )
}

/// Sets the soname libember.so.<major-ABI> and puts a libember.so.0 link beside the built
/// library, so programs linked in the build tree (which then need libember.so.0) still run
/// from there with an rpath.
fn soname() {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("linux") {
        return;
    }
    const SONAME: &str = "libember.so.0";
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,{SONAME}");
    // OUT_DIR is <target-dir>/<profile>/build/ember-<hash>/out.
    let Ok(out) = std::env::var("OUT_DIR") else { return };
    let Some(profile_dir) = std::path::Path::new(&out).ancestors().nth(3) else { return };
    let link = profile_dir.join(SONAME);
    if std::fs::symlink_metadata(&link).is_err() {
        #[cfg(unix)]
        let _ = std::os::unix::fs::symlink("libember.so", &link);
    }
}
