package main

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestMaskedCRC(t *testing.T) {
	// CRC32C of "123456789" is the standard check value 0xe3069283.
	c := crc32.Checksum([]byte("123456789"), crc32.MakeTable(crc32.Castagnoli))
	if c != 0xe3069283 {
		t.Fatalf("crc32c = %#x", c)
	}
	want := ((c >> 15) | (c << 17)) + 0xa282ead8
	if got := maskedCRC([]byte("123456789")); got != want {
		t.Fatalf("maskedCRC = %#x, want %#x", got, want)
	}
}

// The encoding is checked against bytes worked out by hand from the protobuf spec, so that the
// writer and the reader cannot agree on a mistake.
func TestEventMarshalBytes(t *testing.T) {
	got := Event{WallTime: 1.5, Step: 7, Values: []SummaryValue{{Tag: "loss", SimpleValue: 0.25}}}.Marshal()
	want := []byte{
		0x09, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f, // wall_time = 1.5 (field 1, fixed64)
		0x10, 0x07, // step = 7 (field 2, varint)
		0x2a, 0x0d, // summary (field 5), 13 bytes
		0x0a, 0x0b, // value (field 1), 11 bytes
		0x0a, 0x04, 'l', 'o', 's', 's', // tag = "loss"
		0x15, 0, 0, 0x80, 0x3e, // simple_value = 0.25 (field 2, fixed32)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Marshal =\n% x\nwant\n% x", got, want)
	}
	got = Event{WallTime: 1.5, FileVersion: fileVersion}.Marshal()
	want = append([]byte{0x09, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f, 0x1a, 13}, fileVersion...)
	if !bytes.Equal(got, want) {
		t.Fatalf("Marshal =\n% x\nwant\n% x", got, want)
	}
}

func writeTestEvents(t *testing.T) (string, time.Time) {
	t.Helper()
	dir := t.TempDir()
	start := time.Unix(1700000000, 250_000_000)
	w, err := NewEventWriter(dir, "host-a", start)
	if err != nil {
		t.Fatal(err)
	}
	for i, loss := range []float64{9.5, 0.5, 0.004} {
		if err := w.Scalar(int64(10*i), "loss", loss, start.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "events.out.tfevents.1700000000.host-a"); w.Path() != want {
		t.Fatalf("path %s, want %s", w.Path(), want)
	}
	return w.Path(), start
}

func TestEventFileRoundTrip(t *testing.T) {
	path, _ := writeTestEvents(t)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The framing, by hand for the first record: length, its masked CRC, data, its masked CRC.
	n := binary.LittleEndian.Uint64(raw)
	if got, want := binary.LittleEndian.Uint32(raw[8:]), maskedCRC(raw[:8]); got != want {
		t.Fatalf("length CRC %#x, want %#x", got, want)
	}
	data := raw[12 : 12+n]
	if got, want := binary.LittleEndian.Uint32(raw[12+n:]), maskedCRC(data); got != want {
		t.Fatalf("data CRC %#x, want %#x", got, want)
	}

	events, err := ReadEventFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 4 {
		t.Fatalf("%d events, want 4: %+v", len(events), events)
	}
	if e := events[0]; e.FileVersion != "brain.Event:2" || e.WallTime != 1700000000.25 || e.Step != 0 || len(e.Values) != 0 {
		t.Fatalf("first event %+v, want the file version at the start time", e)
	}
	for i, want := range []float32{9.5, 0.5, 0.004} {
		e := events[i+1]
		wantTime := 1700000000.25 + float64(i)
		if e.Step != int64(10*i) || e.WallTime != wantTime || e.FileVersion != "" ||
			len(e.Values) != 1 || e.Values[0].Tag != "loss" || e.Values[0].SimpleValue != want {
			t.Errorf("event %d = %+v, want step %d loss %v at %v", i+1, e, 10*i, want, wantTime)
		}
	}
}

func TestEventFileCorruptionDetected(t *testing.T) {
	path, _ := writeTestEvents(t)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Any one corrupted byte, in a length, a CRC or the data, must be caught.
	for i := range raw {
		bad := bytes.Clone(raw)
		bad[i] ^= 0x5a
		if _, err := ReadRecords(bytes.NewReader(bad)); err == nil {
			t.Fatalf("byte %d corrupted, no error", i)
		} else if !strings.Contains(err.Error(), "CRC") && !strings.Contains(err.Error(), "truncated") {
			t.Fatalf("byte %d corrupted: %v", i, err)
		}
	}
	if _, err := ReadRecords(bytes.NewReader(raw[:len(raw)-1])); err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("truncated file: %v", err)
	}
	// A corrupted data byte names the data CRC.
	n := binary.LittleEndian.Uint64(raw)
	bad := bytes.Clone(raw)
	bad[12+n/2] ^= 1
	if _, err := ReadRecords(bytes.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "record 0: data CRC") {
		t.Fatalf("corrupted data: %v", err)
	}
}

func TestEventWriterKeepsAnExistingFile(t *testing.T) {
	dir := t.TempDir()
	now := time.Unix(1700000000, 0)
	a, err := NewEventWriter(dir, "h", now)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := NewEventWriter(dir, "h", now)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if a.Path() == b.Path() || !strings.HasPrefix(filepath.Base(b.Path()), "events.out.tfevents.1700000000.h.") {
		t.Fatalf("paths %s and %s", a.Path(), b.Path())
	}
}
