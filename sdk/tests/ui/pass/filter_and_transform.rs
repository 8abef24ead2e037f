mod filter_plugin {
    use sluice_sdk::{Record, filter};

    #[filter]
    pub fn keyed(record: &Record<'_>) -> bool {
        record.key().is_some()
    }
}

mod transform_plugin {
    use sluice_sdk::{Output, Record, transform};

    #[transform]
    pub fn upper(record: &Record<'_>, out: &mut Output) {
        let value = record.value().map(<[u8]>::to_ascii_uppercase);
        out.push_at(record.timestamp, record.key(), value.as_deref(), &[]);
    }
}

fn main() {}
