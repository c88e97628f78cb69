package store

import (
	"encoding/binary"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

// uuidCodec is pgx's uuid codec taught google/uuid's type. Left to
// itself, pgx encodes a uuid.UUID through its driver.Valuer, a string that
// it first tries (and fails, building an error) in binary format, and
// scans one through sql.Scanner, parsing text: a visible share of the
// service's CPU on the turn path. This codec moves the 16 bytes in binary.
type uuidCodec struct{ pgtype.UUIDCodec }

// registerUUID installs uuidCodec for uuid and uuidArrayCodec for uuid[]
// on a connection's type map.
func registerUUID(m *pgtype.Map) {
	t := &pgtype.Type{Name: "uuid", OID: pgtype.UUIDOID, Codec: uuidCodec{}}
	m.RegisterType(t)
	m.RegisterType(&pgtype.Type{Name: "_uuid", OID: pgtype.UUIDArrayOID, Codec: uuidArrayCodec{&pgtype.ArrayCodec{ElementType: t}}})
}

// uuidArrayCodec writes a []uuid.UUID as a binary uuid[] itself. pgx's
// array codec reaches a slice of a type it does not know through
// reflection, boxing each element, and every group commit sends its runs'
// ids (TestUUIDArrayAllocs).
type uuidArrayCodec struct{ *pgtype.ArrayCodec }

func (c uuidArrayCodec) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	if _, ok := value.([]uuid.UUID); ok && format == pgtype.BinaryFormatCode {
		return encodeUUIDArray{}
	}
	return c.ArrayCodec.PlanEncode(m, oid, format, value)
}

type encodeUUIDArray struct{}

// Encode writes PostgreSQL's binary array: dimensions, a no-NULLs flag,
// the element type, each dimension's length and lower bound, then each
// element's length and bytes. A nil slice is NULL.
func (encodeUUIDArray) Encode(value any, buf []byte) ([]byte, error) {
	ids := value.([]uuid.UUID)
	if ids == nil {
		return nil, nil
	}
	if len(ids) == 0 {
		buf = binary.BigEndian.AppendUint32(buf, 0) // no dimensions
		buf = binary.BigEndian.AppendUint32(buf, 0)
		return binary.BigEndian.AppendUint32(buf, pgtype.UUIDOID), nil
	}
	buf = binary.BigEndian.AppendUint32(buf, 1)
	buf = binary.BigEndian.AppendUint32(buf, 0)
	buf = binary.BigEndian.AppendUint32(buf, pgtype.UUIDOID)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(ids)))
	buf = binary.BigEndian.AppendUint32(buf, 1)
	for _, id := range ids {
		buf = binary.BigEndian.AppendUint32(buf, 16)
		buf = append(buf, id[:]...)
	}
	return buf, nil
}

func (c uuidCodec) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	switch value.(type) {
	case uuid.UUID, *uuid.UUID:
		if format == pgtype.BinaryFormatCode {
			return encodeUUID{binary: true}
		}
		return encodeUUID{}
	}
	return c.UUIDCodec.PlanEncode(m, oid, format, value)
}

func (c uuidCodec) PlanScan(m *pgtype.Map, oid uint32, format int16, target any) pgtype.ScanPlan {
	if _, ok := target.(*uuid.UUID); ok {
		return scanUUID{binary: format == pgtype.BinaryFormatCode}
	}
	return c.UUIDCodec.PlanScan(m, oid, format, target)
}

type encodeUUID struct{ binary bool }

func (p encodeUUID) Encode(value any, buf []byte) ([]byte, error) {
	var u uuid.UUID
	switch v := value.(type) {
	case uuid.UUID:
		u = v
	case *uuid.UUID:
		if v == nil {
			return nil, nil // NULL
		}
		u = *v
	default:
		return nil, fmt.Errorf("encode uuid: unexpected %T", value)
	}
	if p.binary {
		return append(buf, u[:]...), nil
	}
	return append(buf, u.String()...), nil
}

type scanUUID struct{ binary bool }

func (p scanUUID) Scan(src []byte, dst any) error {
	u := dst.(*uuid.UUID)
	switch {
	case src == nil:
		return fmt.Errorf("cannot scan NULL into *uuid.UUID")
	case p.binary:
		if len(src) != 16 {
			return fmt.Errorf("scan uuid: %d bytes, want 16", len(src))
		}
		copy(u[:], src)
		return nil
	}
	v, err := uuid.ParseBytes(src)
	if err != nil {
		return fmt.Errorf("scan uuid: %w", err)
	}
	*u = v
	return nil
}
