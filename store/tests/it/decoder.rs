//! The decoders never panic, whatever the bytes: the frame decoder on arbitrary and on
//! mutated frames, and the whole recovery on a log whose ring is damaged at random places
//! (where it must also never return a wrong value: a prefix of what was written, or a refusal).

use proptest::prelude::*;
use pure_store::frame::{self, FrameHeader};
use pure_store::sim::SimDisk;
use pure_store::Error;

use crate::harness::{config, log_offset, log_path, open, record_bytes, recovered_state, Model};

/// Records as a frame holds them: each its length, then its bytes.
fn encoded(records: &[Vec<u8>]) -> Vec<u8> {
    let mut bytes = Vec::new();
    for record in records {
        frame::write_varint(&mut bytes, record.len() as u64);
        bytes.extend_from_slice(record);
    }
    bytes
}

/// A frame of `count` records whose payload is `payload`, sealed with `flags`.
fn sealed(payload: &[u8], count: usize, flags: u16) -> Vec<u8> {
    let mut bytes = vec![0u8; frame::HEADER_BYTES];
    bytes.extend_from_slice(payload);
    let header = FrameHeader {
        flags,
        frame_len: 0,
        record_count: count as u32,
        first_lsn: 1,
        position: 0,
        acked_lsn: 0,
        session: 7,
        prev_crc: 0,
        crc: 0,
    };
    frame::seal(&mut bytes, &header);
    bytes
}

fn valid_frame(records: &[Vec<u8>]) -> Vec<u8> {
    sealed(&encoded(records), records.len(), 0)
}

#[test]
fn a_sealed_frame_decodes_to_its_records() {
    let records: Vec<Vec<u8>> = (1..=5).map(|lsn| record_bytes(lsn, 0)).collect();
    let bytes = valid_frame(&records);
    let decoded = frame::decode(&bytes).expect("valid frame");
    let got: Vec<Vec<u8>> = decoded.records().map(<[u8]>::to_vec).collect();
    assert_eq!(got, records);
}

proptest! {
    #![proptest_config(config(2000))]
    #[test]
    fn frame_decoder_never_panics_on_arbitrary_bytes(
        bytes in proptest::collection::vec(any::<u8>(), 0..400),
    ) {
        let _ = frame::decode(&bytes);
    }

    #[test]
    fn frame_decoder_never_panics_on_mutated_frames(
        count in 1usize..6,
        mutations in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8),
        cut in any::<usize>(),
    ) {
        let records: Vec<Vec<u8>> = (1..=count as u64).map(|lsn| record_bytes(lsn, 1)).collect();
        let mut bytes = valid_frame(&records);
        for (at, value) in mutations {
            let at = at % bytes.len();
            bytes[at] = value;
        }
        bytes.truncate(cut % (bytes.len() + 1));
        let _ = frame::decode(&bytes);
    }
}

proptest! {
    #![proptest_config(config(300))]
    #[test]
    fn recovery_of_a_damaged_ring_never_panics_nor_lies(
        seed in any::<u64>(),
        damage in proptest::collection::vec((0u64..4096, any::<u8>()), 1..40),
    ) {
        let disk = SimDisk::new(seed);
        let mut model = Model::default();
        let mut store = open(&disk).expect("fresh store").store;
        for lsn in 1..=30 {
            let bytes = record_bytes(lsn, 0);
            store.append(&bytes).expect("append");
            model.records.push(bytes);
            if lsn % 3 == 0 {
                store.commit().expect("commit");
            }
        }
        drop(store);
        disk.power_loss();
        for (position, byte) in damage {
            disk.damage(&log_path(), log_offset(position), &[byte]);
        }
        match open(&disk) {
            Ok(recovered) => {
                let state = recovered_state(&recovered);
                prop_assert_eq!(&state[..], &model.records[..state.len()]);
            }
            Err(Error::Corrupt { .. }) => {}
            Err(e) => prop_assert!(false, "unexpected error {}", e),
        }
    }
}

/// `valid_frame` with `FLAG_PADDED` and `pad` zero bytes after the records.
fn padded_frame(records: &[Vec<u8>], pad: usize) -> Vec<u8> {
    let mut payload = encoded(records);
    payload.resize(payload.len() + pad, 0);
    sealed(&payload, records.len(), frame::FLAG_PADDED)
}

/// Re-seals a frame after its bytes were changed, so that only the change is refused.
/// (By hand: `seal` refuses to make a padded frame that is not whole sectors.)
fn reseal(bytes: &mut [u8]) {
    let len = bytes.len() as u32;
    bytes[8..12].copy_from_slice(&len.to_le_bytes());
    let crc = frame::frame_crc(bytes);
    bytes[52..56].copy_from_slice(&crc.to_le_bytes());
}

#[test]
fn a_padded_frame_decodes_to_its_records_and_only_zeros_within_a_sector_pad_it() {
    let records: Vec<Vec<u8>> = (1..=3).map(|lsn| record_bytes(lsn, 0)).collect();
    let unpadded = valid_frame(&records).len();
    let pad = frame::padding_for(unpadded);
    let bytes = padded_frame(&records, pad);
    assert_eq!(bytes.len() % frame::SECTOR_BYTES, 0);
    let decoded = frame::decode(&bytes).expect("a padded frame");
    let got: Vec<Vec<u8>> = decoded.records().map(<[u8]>::to_vec).collect();
    assert_eq!(got, records, "the padding is not a record");

    let mut not_zero = bytes.clone();
    *not_zero.last_mut().expect("padding") = 1;
    reseal(&mut not_zero);
    assert!(matches!(
        frame::decode(&not_zero),
        Err(frame::FrameError::BadRecords(_))
    ));

    let mut a_sector_more = padded_frame(&records, pad + frame::SECTOR_BYTES);
    reseal(&mut a_sector_more);
    assert!(matches!(
        frame::decode(&a_sector_more),
        Err(frame::FrameError::BadRecords(_))
    ));

    if pad > 0 {
        let mut inside_a_sector = bytes.clone();
        inside_a_sector.pop();
        reseal(&mut inside_a_sector);
        assert!(matches!(
            frame::decode(&inside_a_sector),
            Err(frame::FrameError::BadRecords(_))
        ));
    }

    // An unpadded frame with bytes after its records is refused, as before padding existed.
    let mut unflagged = bytes.clone();
    unflagged[6] = 0;
    reseal(&mut unflagged);
    assert!(matches!(
        frame::decode(&unflagged),
        Err(frame::FrameError::BadRecords(_))
    ));

    let mut unknown_flag = bytes;
    unknown_flag[6] |= 4;
    reseal(&mut unknown_flag);
    assert!(matches!(
        frame::decode(&unknown_flag),
        Err(frame::FrameError::BadFlags(5))
    ));
}

/// A frame of `records` in the COMPRESSED form, padded to whole sectors, with `edit` applied to
/// its payload before it is sealed.
fn compressed_frame(records: &[Vec<u8>], edit: impl Fn(&mut Vec<u8>)) -> Vec<u8> {
    let mut payload = Vec::new();
    let compressed = frame::compress(&mut frame::compressor(), &encoded(records), &mut payload);
    assert!(compressed, "records that compress");
    edit(&mut payload);
    // The padding after the header's bytes too: the frame ends on a sector.
    let padded = (frame::HEADER_BYTES + payload.len()).next_multiple_of(frame::SECTOR_BYTES);
    payload.resize(padded - frame::HEADER_BYTES, 0);
    sealed(
        &payload,
        records.len(),
        frame::FLAG_PADDED | frame::FLAG_COMPRESSED,
    )
}

#[test]
fn a_compressed_frame_decodes_to_its_records_and_only_to_them() {
    let records: Vec<Vec<u8>> = (1..=4).map(|i| vec![i as u8; 300]).collect();
    let bytes = compressed_frame(&records, |_| {});
    assert_eq!(
        bytes.len(),
        frame::SECTOR_BYTES,
        "1,200 bytes of records in one sector"
    );
    let decoded = frame::decode(&bytes).expect("a compressed frame");
    let got: Vec<Vec<u8>> = decoded.records().map(<[u8]>::to_vec).collect();
    assert_eq!(got, records);

    // Records that do not compress are left as they are.
    let mut noise = vec![0u8; 300];
    pure_store::sim::SimRng::new(3).fill(&mut noise);
    assert!(!frame::compress(
        &mut frame::compressor(),
        &noise,
        &mut Vec::new()
    ));

    let refused = |edit: &dyn Fn(&mut Vec<u8>), what: &str| {
        let bytes = compressed_frame(&records, edit);
        assert!(
            matches!(frame::decode(&bytes), Err(frame::FrameError::BadRecords(_))),
            "{what}: {:?}",
            frame::decode(&bytes).map(|f| f.header)
        );
    };
    // The first byte is the records' length (1,208 as a 2-byte varint: b8 09).
    refused(&|p| p[1] += 1, "a length longer than the records");
    refused(&|p| p[1] -= 1, "a length shorter than the records");
    refused(&|p| p[2] += 1, "compressed bytes longer than they are");
    refused(
        &|p| *p.last_mut().unwrap() ^= 0x55,
        "compressed bytes that do not decompress",
    );
    refused(
        &|p| p.push(1),
        "a byte after the compressed records, before the padding",
    );
}
