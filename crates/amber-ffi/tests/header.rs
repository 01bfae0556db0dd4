//! `include/amberfs.h` is what cbindgen makes of the exports: regenerated
//! here and compared, so a changed signature or doc comment cannot leave
//! the checked-in header behind. `AMBERFS_BLESS=1` rewrites it.

#[test]
fn header_matches_the_exports() {
    let dir = env!("CARGO_MANIFEST_DIR");
    let config =
        cbindgen::Config::from_file(format!("{dir}/cbindgen.toml")).expect("cbindgen.toml");
    let mut made = Vec::new();
    cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
        .expect("cbindgen parses the crate")
        .write(&mut made);
    let path = format!("{dir}/include/amberfs.h");
    if std::env::var_os("AMBERFS_BLESS").is_some() {
        std::fs::write(&path, &made).expect("write the header");
        return;
    }
    let have = std::fs::read(&path).unwrap_or_default();
    assert!(
        have == made,
        "include/amberfs.h differs from the exports: run \
         AMBERFS_BLESS=1 cargo test -p amber-ffi --test header, and review the diff"
    );
}
