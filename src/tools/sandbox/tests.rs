use super::*;
use pretty_assertions::assert_eq;

#[test]
fn sizes_read_as_people_write_them() {
    assert_eq!(ByteSize::parse("1024").unwrap(), ByteSize(1024));
    assert_eq!(ByteSize::parse("64 MiB").unwrap(), ByteSize(64 << 20));
    assert_eq!(ByteSize::parse("2GB").unwrap(), ByteSize(2_000_000_000));
    assert_eq!(ByteSize::parse("512k").unwrap(), ByteSize(512_000));
    assert!(ByteSize::parse("lots").is_err());
    assert!(
        ByteSize::parse("3 parsecs")
            .unwrap_err()
            .contains("unknown unit")
    );
    assert!(ByteSize::parse("99999999999 TiB").is_err());
}
