//! Secure defaults, with the real binary: a non-loopback address without
//! authentication refuses to start unless the operator opts out; with a
//! secret, calls need keys, which `roncho keys create` mints.

use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use roncho_proto::v1 as pb;
use roncho_proto::v1::recall_service_client::RecallServiceClient;
use tonic::Code;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

use crate::support;

const SECRET: &str = "exposure-test-secret-of-thirty-two-bytes";

/// `roncho <args>` with no `RONCHO_*` from the environment and full-text search.
fn roncho(args: &[&str], data_dir: &std::path::Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_roncho"));
    command
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("RONCHO_EMBEDDING_PROVIDER", "none")
        .env("RONCHO_LOG", "warn");
    command
}

struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `roncho serve` on all interfaces and waits until it answers health checks.
async fn serve(extra: &[&str], data_dir: &std::path::Path) -> (Running, tonic::transport::Channel) {
    let port = support::free_port();
    let listen = format!("0.0.0.0:{port}");
    let mut args = vec!["serve", "--listen", listen.as_str()];
    args.extend_from_slice(extra);
    let child = roncho(&args, data_dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let running = Running(child);
    let endpoint = tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{port}")).unwrap();
    for _ in 0..200 {
        if let Ok(channel) = endpoint.connect().await {
            let serving = HealthClient::new(channel.clone())
                .check(HealthCheckRequest { service: String::new() })
                .await
                .is_ok();
            if serving {
                return (running, channel);
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("roncho serve did not come up on {listen}");
}

fn run(command: &mut Command) -> Output {
    command.output().unwrap()
}

#[tokio::test]
async fn a_non_loopback_address_without_auth_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let port = support::free_port().to_string();
    let listen = format!("0.0.0.0:{port}");
    let output = run(roncho(&["serve", "--listen", &listen], dir.path()).stdin(Stdio::null()));
    assert!(!output.status.success(), "it started");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("refusing to serve")
            && stderr.contains("auth_jwt_secret")
            && stderr.contains("--insecure-no-auth"),
        "{stderr}"
    );
    // Nothing was listening meanwhile.
    assert!(std::net::TcpStream::connect(format!("127.0.0.1:{port}")).is_err());
}

#[tokio::test]
async fn with_a_secret_calls_need_keys_that_roncho_keys_create_mints() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, channel) = serve(&["--auth-jwt-secret", SECRET], dir.path()).await;
    let mut recall = RecallServiceClient::new(channel);
    let status = recall
        .list_workspaces(pb::ListWorkspacesRequest::default())
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated);
    assert!(status.message().contains("no access token"), "{status:?}");

    let mint = |args: &[&str]| {
        let mut all = vec!["keys", "create", "--auth-jwt-secret", SECRET];
        all.extend_from_slice(args);
        let output = run(&mut roncho(&all, dir.path()));
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).unwrap().trim().to_owned()
    };
    let call = |key: &str| {
        let mut request = tonic::Request::new(pb::ListWorkspacesRequest::default());
        request
            .metadata_mut()
            .insert("authorization", format!("Bearer {key}").parse().unwrap());
        request
    };
    let admin = mint(&["--admin"]);
    recall.list_workspaces(call(&admin)).await.unwrap();
    let scoped = mint(&["--workspace", "acme", "--peer", "alice", "--expires-in", "1h"]);
    let status = recall.list_workspaces(call(&scoped)).await.unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied);

    // Without a secret there is nothing to sign with.
    let output = run(&mut roncho(&["keys", "create", "--admin"], dir.path()));
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("auth_jwt_secret"));
}

#[tokio::test]
async fn the_operator_can_opt_out_and_status_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, channel) = serve(&["--insecure-no-auth"], dir.path()).await;
    RecallServiceClient::new(channel)
        .list_workspaces(pb::ListWorkspacesRequest::default())
        .await
        .unwrap();
    let output = run(&mut roncho(
        &["status", "--json", "--listen", "0.0.0.0:1", "--insecure-no-auth"],
        dir.path(),
    ));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let auth = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|check| check["name"] == "auth")
        .expect("an auth line")
        .clone();
    assert_eq!(auth["ok"], false, "{auth}");
    assert!(
        auth["detail"].as_str().unwrap().contains("--insecure-no-auth"),
        "{auth}"
    );
}
