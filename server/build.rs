//! Compiles `proto/*.proto` with prost-build, using the pure-Rust `protox` compiler so the
//! build needs no `protoc` binary.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protos = ["../proto/petrel.proto", "../proto/flight_session.proto"];
    for p in protos {
        println!("cargo:rerun-if-changed={p}");
    }
    let fds = protox::compile(protos, ["../proto"])?;
    prost_build::Config::new().bytes(["."]).compile_fds(fds)?;
    Ok(())
}
