//! Container credentials and EC2 instance metadata.

use pretty_assertions::assert_eq;

use super::*;

pub(super) fn metadata_answer(id: &str, expiration: Timestamp) -> String {
    serde_json::json!({
        "Code": "Success",
        "Type": "AWS-HMAC",
        "AccessKeyId": id,
        "SecretAccessKey": "machine-secret",
        "Token": "machine-token",
        "Expiration": expiration.to_string(),
    })
    .to_string()
}

#[tokio::test]
async fn container_credentials_with_an_authorization_token() {
    let home = home_with(None, None);
    let token_file = home.path().join("eks-token");
    std::fs::write(&token_file, "token-from-file\n").unwrap();
    let mock = Mock::start().await;
    mock.on(
        "GET",
        "/full",
        200,
        metadata_answer("ASIAFULL", in_an_hour()),
    );
    mock.on(
        "GET",
        "/v2/credentials/abc",
        200,
        metadata_answer("ASIAECS", in_an_hour()),
    );
    let endpoints = Endpoints {
        container: Some(mock.url.clone()),
        ..Endpoints::default()
    };
    let full = format!("{}/full", mock.url);

    let settings = load_with(
        &[
            ("AWS_CONTAINER_CREDENTIALS_FULL_URI", &full),
            (
                "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
                token_file.to_str().unwrap(),
            ),
            (
                "AWS_CONTAINER_AUTHORIZATION_TOKEN",
                "ignored-beside-the-file",
            ),
        ],
        Some(home.path()),
        &endpoints,
        &Cache::new(),
    )
    .await
    .unwrap();
    assert_eq!(
        settings.credentials,
        Some((
            keys("ASIAFULL", "machine-secret", Some("machine-token")),
            Source::Container { url: full.clone() }
        ))
    );
    let settings = load_with(
        &[
            (
                "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                "/v2/credentials/abc",
            ),
            ("AWS_CONTAINER_AUTHORIZATION_TOKEN", "token-from-env"),
        ],
        Some(home.path()),
        &endpoints,
        &Cache::new(),
    )
    .await
    .unwrap();
    assert_eq!(settings.credentials.unwrap().0.access_key_id, "ASIAECS");
    let authorizations: Vec<Option<String>> = mock
        .seen()
        .iter()
        .map(|s| s.header("authorization").map(str::to_string))
        .collect();
    assert_eq!(
        authorizations,
        [
            Some("token-from-file".to_string()),
            Some("token-from-env".to_string())
        ]
    );

    // Plain HTTP to another host would send the token in the clear.
    assert_eq!(
        load(
            &[(
                "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                "http://10.0.0.1/creds"
            )],
            Some(home.path())
        )
        .await,
        Err(CredentialsError::Container {
            url: "http://10.0.0.1/creds".to_string(),
            message: "AWS_CONTAINER_CREDENTIALS_FULL_URI must be https, or http to a loopback \
                      address or the ECS/EKS agent"
                .to_string(),
        })
    );
}

pub(super) async fn imds_mock() -> Mock {
    let mock = Mock::start().await;
    mock.on("PUT", "/latest/api/token", 200, "imds-session-token");
    mock.on(
        "GET",
        "/latest/meta-data/iam/security-credentials/",
        200,
        "web-server-role\n",
    );
    mock.on(
        "GET",
        "/latest/meta-data/iam/security-credentials/web-server-role",
        200,
        metadata_answer("ASIAIMDS", in_an_hour()),
    );
    mock
}

#[tokio::test]
async fn imds_v2_takes_a_token_then_the_role_then_its_credentials() {
    let home = home_with(None, None);
    let mock = imds_mock().await;
    let settings = load(
        &[
            ("AWS_EC2_METADATA_DISABLED", ""),
            ("AWS_EC2_METADATA_SERVICE_ENDPOINT", &mock.url),
        ],
        Some(home.path()),
    )
    .await
    .unwrap();
    assert_eq!(
        settings.credentials,
        Some((
            keys("ASIAIMDS", "machine-secret", Some("machine-token")),
            Source::InstanceMetadata
        ))
    );
    let seen = mock.seen();
    let calls: Vec<(String, Option<&str>, Option<&str>)> = seen
        .iter()
        .map(|s| {
            (
                format!("{} {}", s.method, s.path),
                s.header("x-aws-ec2-metadata-token-ttl-seconds"),
                s.header("x-aws-ec2-metadata-token"),
            )
        })
        .collect();
    assert_eq!(
        calls,
        [
            ("PUT /latest/api/token".to_string(), Some("21600"), None),
            (
                "GET /latest/meta-data/iam/security-credentials/".to_string(),
                None,
                Some("imds-session-token")
            ),
            (
                "GET /latest/meta-data/iam/security-credentials/web-server-role".to_string(),
                None,
                Some("imds-session-token")
            ),
        ]
    );
}

#[tokio::test]
async fn imds_can_be_disabled_and_an_absent_one_is_not_an_error() {
    let home = home_with(None, None);
    let mock = imds_mock().await;
    let settings = load(
        &[
            ("AWS_EC2_METADATA_DISABLED", "TRUE"),
            ("AWS_EC2_METADATA_SERVICE_ENDPOINT", &mock.url),
        ],
        Some(home.path()),
    )
    .await
    .unwrap();
    assert_eq!(settings.credentials, None);
    assert_eq!(mock.requests(), Vec::<String>::new());

    // Nothing listening: not an EC2 instance, so no credentials here.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let settings = load(
        &[
            ("AWS_EC2_METADATA_DISABLED", ""),
            ("AWS_EC2_METADATA_SERVICE_ENDPOINT", &closed),
        ],
        Some(home.path()),
    )
    .await
    .unwrap();
    assert_eq!(settings.credentials, None);
}
