//! Compiles `proto/roncho/v1` with protox (no system protoc) and writes the
//! descriptor set that gRPC server reflection serves.

use std::path::PathBuf;

const PROTO_FILES: &[&str] = &[
    "roncho/v1/types.proto",
    "roncho/v1/ingest.proto",
    "roncho/v1/recall.proto",
    "roncho/v1/dialectic.proto",
    "roncho/v1/deriver.proto",
    "roncho/v1/dreamer.proto",
    "roncho/v1/keys.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let proto_root = manifest_dir.join("../../proto");
    // compile_fds never sees file paths, so the rerun triggers are ours to emit.
    println!("cargo:rerun-if-changed={}", proto_root.display());
    for file in PROTO_FILES {
        println!("cargo:rerun-if-changed={}", proto_root.join(file).display());
    }

    let file_descriptors = protox::compile(PROTO_FILES, [&proto_root])?;
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(
        out_dir.join("roncho_descriptor.bin"),
        prost::Message::encode_to_vec(&file_descriptors),
    )?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        // Malformed requests are the caller's fault: INVALID_ARGUMENT, not INTERNAL.
        .codec_path("crate::codec::ProstCodec")
        .compile_fds(file_descriptors)?;
    Ok(())
}
