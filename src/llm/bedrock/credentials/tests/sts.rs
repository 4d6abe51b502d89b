//! STS: assumed roles and web identity.

use pretty_assertions::assert_eq;

use super::*;

#[tokio::test]
async fn assume_role_is_signed_with_the_source_profile_and_cached() {
    let home = home_with(
        Some("[base]\naws_access_key_id = AKIDBASE\naws_secret_access_key = base/secret\n"),
        Some(
            "[profile assume]\nrole_arn = arn:aws:iam::123456789012:role/dev\n\
             source_profile = base\nrole_session_name = pincer-test\nexternal_id = ext-1\n\
             region = eu-west-1\n",
        ),
    );
    let mock = Mock::start().await;
    mock.on(
        "POST",
        "/",
        200,
        sts_fixture("assume_role.xml", in_an_hour()),
    );
    let endpoints = Endpoints {
        sts: Some(mock.url.clone()),
        ..Endpoints::default()
    };
    let cache = Cache::new();
    for _ in 0..2 {
        let settings = load_with(
            &[("AWS_PROFILE", "assume")],
            Some(home.path()),
            &endpoints,
            &cache,
        )
        .await
        .unwrap();
        assert_eq!(
            settings.credentials,
            Some((
                keys(
                    "ASIAROLEEXAMPLE",
                    "role/secret+EXAMPLE",
                    Some("FwoGZXIvYXdzEROLE&TOKEN")
                ),
                Source::AssumeRole {
                    profile: "assume".to_string(),
                    role_arn: "arn:aws:iam::123456789012:role/dev".to_string(),
                }
            ))
        );
    }
    let seen = mock.seen();
    assert_eq!(seen.len(), 1, "the second load is cached");
    let request = &seen[0];
    assert_eq!(
        request.form(),
        [
            ("Action", "AssumeRole"),
            ("Version", "2011-06-15"),
            ("RoleArn", "arn:aws:iam::123456789012:role/dev"),
            ("RoleSessionName", "pincer-test"),
            ("ExternalId", "ext-1"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()))
    );
    assert!(
        request
            .header("authorization")
            .unwrap()
            .contains("Credential=AKIDBASE/"),
        "{request:?}"
    );
    assert_signed_by(request, "AKIDBASE", "base/secret", "eu-west-1", "sts");
}

#[tokio::test]
async fn web_identity_from_the_environment() {
    let home = home_with(None, None);
    let token_file = home.path().join("token");
    std::fs::write(&token_file, "oidc.jwt.token\n").unwrap();
    let mock = Mock::start().await;
    mock.on(
        "POST",
        "/",
        200,
        sts_fixture("web_identity.xml", in_an_hour()),
    );
    let endpoints = Endpoints {
        sts: Some(mock.url.clone()),
        ..Endpoints::default()
    };
    let settings = load_with(
        &[
            ("AWS_WEB_IDENTITY_TOKEN_FILE", token_file.to_str().unwrap()),
            ("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/eks-pod"),
            ("AWS_ROLE_SESSION_NAME", "ci"),
            ("AWS_REGION", "us-west-2"),
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
            keys(
                "ASIAWEBIDEXAMPLE",
                "web/identity+secret",
                Some("IQoJb3JpZ2luX2VjEWEBIDENTITY")
            ),
            Source::WebIdentity {
                role_arn: "arn:aws:iam::123456789012:role/eks-pod".to_string()
            }
        ))
    );
    let seen = mock.seen();
    assert_eq!(
        seen[0].form(),
        [
            ("Action", "AssumeRoleWithWebIdentity"),
            ("Version", "2011-06-15"),
            ("RoleArn", "arn:aws:iam::123456789012:role/eks-pod"),
            ("RoleSessionName", "ci"),
            ("WebIdentityToken", "oidc.jwt.token"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()))
    );
    assert_eq!(seen[0].header("authorization"), None, "unsigned");
}

#[tokio::test]
async fn sts_errors_name_the_operation_and_the_role() {
    let home = home_with(None, None);
    let token_file = home.path().join("token");
    std::fs::write(&token_file, "oidc.jwt.token").unwrap();
    let mock = Mock::start().await;
    mock.on(
        "POST",
        "/",
        403,
        sts_fixture("access_denied.xml", in_an_hour()),
    );
    let endpoints = Endpoints {
        sts: Some(mock.url.clone()),
        ..Endpoints::default()
    };
    let error = load_with(
        &[
            ("AWS_WEB_IDENTITY_TOKEN_FILE", token_file.to_str().unwrap()),
            ("AWS_ROLE_ARN", "arn:aws:iam::1:role/r"),
        ],
        Some(home.path()),
        &endpoints,
        &Cache::new(),
    )
    .await
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "STS AssumeRoleWithWebIdentity for arn:aws:iam::1:role/r failed: HTTP 403, AccessDenied: \
         Not authorized to perform sts:AssumeRoleWithWebIdentity; check the role ARN \
         (AWS_ROLE_ARN or the profile's role_arn) and that the role trusts the token's identity \
         provider"
    );
}
