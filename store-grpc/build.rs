//! Compiles miniplane's description of etcd's v3 API (`proto/`) into Rust with tonic's
//! protobuf generator. Needs `protoc` (Debian's protobuf-compiler).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    tonic_prost_build::configure()
        .build_client(false)
        .build_server(true)
        .compile_protos(
            &["proto/etcdserverpb/rpc.proto", "proto/mvccpb/kv.proto"],
            &["proto"],
        )?;
    Ok(())
}
