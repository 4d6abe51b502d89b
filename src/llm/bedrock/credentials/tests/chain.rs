//! The order of the sources, and the cache.

use pretty_assertions::assert_eq;

use super::files::CREDENTIALS;
use super::metadata::{imds_mock, metadata_answer};
use super::*;

#[tokio::test]
async fn the_profile_beats_the_container_and_the_container_beats_imds() {
    let home = home_with(Some(CREDENTIALS), None);
    let mock = imds_mock().await;
    mock.on(
        "GET",
        "/container",
        200,
        metadata_answer("ASIACONTAINER", in_an_hour()),
    );
    let container = format!("{}/container", mock.url);
    let machine = [
        ("AWS_EC2_METADATA_DISABLED", ""),
        ("AWS_EC2_METADATA_SERVICE_ENDPOINT", mock.url.as_str()),
        ("AWS_CONTAINER_CREDENTIALS_FULL_URI", container.as_str()),
    ];

    let settings = load(&machine, Some(home.path())).await.unwrap();
    assert_eq!(settings.credentials.unwrap().0.access_key_id, "AKIDDEFAULT");
    assert_eq!(mock.requests(), Vec::<String>::new());

    let no_profile = home_with(None, None);
    let settings = load(&machine, Some(no_profile.path())).await.unwrap();
    assert_eq!(
        settings.credentials.unwrap().0.access_key_id,
        "ASIACONTAINER"
    );
    assert_eq!(mock.requests(), ["GET /container"]);

    let settings = load(&machine[..2], Some(no_profile.path())).await.unwrap();
    assert_eq!(settings.credentials.unwrap().0.access_key_id, "ASIAIMDS");
}

#[tokio::test]
async fn cached_credentials_are_refreshed_five_minutes_before_they_expire() {
    let home = home_with(None, None);
    let mock = Mock::start().await;
    mock.on(
        "GET",
        "/lasting",
        200,
        metadata_answer("ASIALASTING", in_an_hour()),
    );
    let soon = Timestamp::now() + SignedDuration::from_mins(4);
    mock.on(
        "GET",
        "/expiring",
        200,
        metadata_answer("ASIAEXPIRING", soon),
    );
    let cache = Cache::new();
    let load_from = async |path: &str| {
        let url = format!("{}{path}", mock.url);
        load_with(
            &[("AWS_CONTAINER_CREDENTIALS_FULL_URI", &url)],
            Some(home.path()),
            &Endpoints::default(),
            &cache,
        )
        .await
        .unwrap()
        .credentials
        .unwrap()
        .0
        .access_key_id
    };

    assert_eq!(load_from("/lasting").await, "ASIALASTING");
    assert_eq!(load_from("/lasting").await, "ASIALASTING");
    assert_eq!(mock.requests(), ["GET /lasting"], "cached within validity");

    assert_eq!(load_from("/expiring").await, "ASIAEXPIRING");
    assert_eq!(load_from("/expiring").await, "ASIAEXPIRING");
    assert_eq!(
        mock.requests(),
        ["GET /lasting", "GET /expiring", "GET /expiring"],
        "less than five minutes left: fetched again"
    );
}
