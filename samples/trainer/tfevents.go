package main

// TensorBoard reads event files: TFRecord-framed, serialized tensorflow.Event protobufs. Both
// formats are small enough to write by hand, which keeps the trainer a dependency-free static
// binary. Only the fields TensorBoard needs for a scalar are written:
//
//	Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//	Summary { repeated Value value = 1; }
//	Value   { string tag = 1; float simple_value = 2; }

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"time"
)

// fileVersion is what the first record of every event file says; TensorBoard checks it.
const fileVersion = "brain.Event:2"

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// maskedCRC is TFRecord's checksum: CRC32C rotated and offset, because a plain CRC of data that
// itself holds CRCs is weak.
func maskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, crc32c)
	return ((c >> 15) | (c << 17)) + 0xa282ead8
}

// Event is the part of tensorflow.Event the trainer writes and the tests read back.
type Event struct {
	WallTime    float64 // seconds since the epoch
	Step        int64
	FileVersion string
	Values      []SummaryValue // Summary.value
}

// SummaryValue is a scalar of a Summary.
type SummaryValue struct {
	Tag         string
	SimpleValue float32
}

// Protobuf wire types.
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireFixed32 = 5
)

func appendTag(b []byte, field, wire int) []byte {
	return binary.AppendUvarint(b, uint64(field<<3|wire))
}

func appendBytesField(b []byte, field int, data []byte) []byte {
	b = appendTag(b, field, wireBytes)
	b = binary.AppendUvarint(b, uint64(len(data)))
	return append(b, data...)
}

// Marshal encodes e as a tensorflow.Event. Zero fields are left out, as proto3 does.
func (e Event) Marshal() []byte {
	var b []byte
	b = appendTag(b, 1, wireFixed64)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(e.WallTime))
	if e.Step != 0 {
		b = appendTag(b, 2, wireVarint)
		b = binary.AppendUvarint(b, uint64(e.Step)) // negative int64s are 10-byte varints
	}
	if e.FileVersion != "" {
		b = appendBytesField(b, 3, []byte(e.FileVersion))
	}
	if len(e.Values) > 0 {
		var summary []byte
		for _, v := range e.Values {
			var value []byte
			value = appendBytesField(value, 1, []byte(v.Tag))
			value = appendTag(value, 2, wireFixed32)
			value = binary.LittleEndian.AppendUint32(value, math.Float32bits(v.SimpleValue))
			summary = appendBytesField(summary, 1, value)
		}
		b = appendBytesField(b, 5, summary)
	}
	return b
}

// field is one decoded protobuf field: num and wire type, with the value in u (varint, fixed)
// or data (length-delimited).
type field struct {
	num, wire int
	u         uint64
	data      []byte
}

// nextField decodes the field at the start of b and returns the rest.
func nextField(b []byte) (field, []byte, error) {
	key, n := binary.Uvarint(b)
	if n <= 0 {
		return field{}, nil, errors.New("bad field key")
	}
	b = b[n:]
	f := field{num: int(key >> 3), wire: int(key & 7)}
	switch f.wire {
	case wireVarint:
		f.u, n = binary.Uvarint(b)
		if n <= 0 {
			return f, nil, fmt.Errorf("field %d: bad varint", f.num)
		}
		return f, b[n:], nil
	case wireFixed64:
		if len(b) < 8 {
			return f, nil, fmt.Errorf("field %d: truncated fixed64", f.num)
		}
		f.u = binary.LittleEndian.Uint64(b)
		return f, b[8:], nil
	case wireFixed32:
		if len(b) < 4 {
			return f, nil, fmt.Errorf("field %d: truncated fixed32", f.num)
		}
		f.u = uint64(binary.LittleEndian.Uint32(b))
		return f, b[4:], nil
	case wireBytes:
		l, n := binary.Uvarint(b)
		if n <= 0 || l > uint64(len(b)-n) {
			return f, nil, fmt.Errorf("field %d: bad length", f.num)
		}
		f.data = b[n : n+int(l)]
		return f, b[n+int(l):], nil
	}
	return f, nil, fmt.Errorf("field %d: unsupported wire type %d", f.num, f.wire)
}

// forFields calls fn for each field of the message b, stopping at the first error.
func forFields(b []byte, fn func(field) error) error {
	for len(b) > 0 {
		f, rest, err := nextField(b)
		if err != nil {
			return err
		}
		if err := fn(f); err != nil {
			return err
		}
		b = rest
	}
	return nil
}

// DecodeEvent decodes a serialized tensorflow.Event, skipping fields it does not know.
func DecodeEvent(b []byte) (Event, error) {
	var e Event
	err := forFields(b, func(f field) error {
		switch {
		case f.num == 1 && f.wire == wireFixed64:
			e.WallTime = math.Float64frombits(f.u)
		case f.num == 2 && f.wire == wireVarint:
			e.Step = int64(f.u)
		case f.num == 3 && f.wire == wireBytes:
			e.FileVersion = string(f.data)
		case f.num == 5 && f.wire == wireBytes:
			return forFields(f.data, func(f field) error {
				if f.num != 1 || f.wire != wireBytes {
					return nil
				}
				var v SummaryValue
				err := forFields(f.data, func(f field) error {
					switch {
					case f.num == 1 && f.wire == wireBytes:
						v.Tag = string(f.data)
					case f.num == 2 && f.wire == wireFixed32:
						v.SimpleValue = math.Float32frombits(uint32(f.u))
					}
					return nil
				})
				e.Values = append(e.Values, v)
				return err
			})
		}
		return nil
	})
	return e, err
}

// writeRecord frames data as one TFRecord, in a single Write so that TensorBoard, which reads
// the file while it grows, rarely sees half a record.
func writeRecord(w io.Writer, data []byte) error {
	buf := make([]byte, 0, 8+4+len(data)+4)
	buf = binary.LittleEndian.AppendUint64(buf, uint64(len(data)))
	buf = binary.LittleEndian.AppendUint32(buf, maskedCRC(buf[:8]))
	buf = append(buf, data...)
	buf = binary.LittleEndian.AppendUint32(buf, maskedCRC(data))
	_, err := w.Write(buf)
	return err
}

// ReadRecords reads TFRecords until EOF, verifying both checksums of each.
func ReadRecords(r io.Reader) ([][]byte, error) {
	br := bufio.NewReader(r)
	var records [][]byte
	for i := 0; ; i++ {
		var header [12]byte
		if _, err := io.ReadFull(br, header[:]); err == io.EOF {
			return records, nil
		} else if err != nil {
			return records, fmt.Errorf("record %d: truncated header: %w", i, err)
		}
		if got, want := binary.LittleEndian.Uint32(header[8:]), maskedCRC(header[:8]); got != want {
			return records, fmt.Errorf("record %d: length CRC is %#08x, want %#08x", i, got, want)
		}
		// The length is trusted only now that its CRC matched.
		data := make([]byte, binary.LittleEndian.Uint64(header[:8])+4)
		if _, err := io.ReadFull(br, data); err != nil {
			return records, fmt.Errorf("record %d: truncated data: %w", i, err)
		}
		data, crc := data[:len(data)-4], binary.LittleEndian.Uint32(data[len(data)-4:])
		if want := maskedCRC(data); crc != want {
			return records, fmt.Errorf("record %d: data CRC is %#08x, want %#08x", i, crc, want)
		}
		records = append(records, data)
	}
}

// ReadEventFile reads and decodes every event of an event file.
func ReadEventFile(path string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	records, err := ReadRecords(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	events := make([]Event, 0, len(records))
	for i, rec := range records {
		e, err := DecodeEvent(rec)
		if err != nil {
			return events, fmt.Errorf("%s: record %d: %w", path, i, err)
		}
		events = append(events, e)
	}
	return events, nil
}

// EventWriter appends scalar events to a new event file.
type EventWriter struct {
	f    *os.File
	path string
}

// NewEventWriter creates dir and, in it, events.out.tfevents.<unix seconds>.<hostname>, the
// name TensorBoard looks for, starting with the file_version record. A file of that name can
// already exist when a replica restarts within the same second with the same hostname (pods
// keep their names); a numeric suffix then keeps both, and TensorBoard still finds it.
func NewEventWriter(dir, hostname string, now time.Time) (*EventWriter, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	base := filepath.Join(dir, fmt.Sprintf("events.out.tfevents.%d.%s", now.Unix(), hostname))
	path := base
	var f *os.File
	for n := 1; ; n++ {
		var err error
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) || n == 100 {
			return nil, err
		}
		path = fmt.Sprintf("%s.%d", base, n)
	}
	w := &EventWriter{f: f, path: path}
	if err := writeRecord(f, Event{WallTime: wallTime(now), FileVersion: fileVersion}.Marshal()); err != nil {
		f.Close()
		return nil, err
	}
	return w, nil
}

// Path is the event file's path.
func (w *EventWriter) Path() string { return w.path }

// Scalar appends one scalar at step.
func (w *EventWriter) Scalar(step int64, tag string, value float64, now time.Time) error {
	e := Event{WallTime: wallTime(now), Step: step, Values: []SummaryValue{{Tag: tag, SimpleValue: float32(value)}}}
	return writeRecord(w.f, e.Marshal())
}

// Close closes the file.
func (w *EventWriter) Close() error { return w.f.Close() }

// wallTime adds the fraction separately: UnixNano/1e9 rounds 1700000000.25 to ...0.2499998.
func wallTime(t time.Time) float64 { return float64(t.Unix()) + float64(t.Nanosecond())/1e9 }
