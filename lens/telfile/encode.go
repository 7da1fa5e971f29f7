package telfile

import "io"

// AppendLine appends e to dst as one compact JSON line, including the
// trailing newline. On error dst is returned unchanged, so a caller that
// builds a batch in one buffer never ends up with half a line in it.
func AppendLine(dst []byte, e Entry) ([]byte, error) {
	b, err := marshalNoEscape(e)
	if err != nil {
		return dst, err
	}
	dst = append(dst, b...)
	return append(dst, '\n'), nil
}

// Encoder writes entries to an io.Writer, one line per Encode call.
type Encoder struct {
	w   io.Writer
	buf []byte
}

// NewEncoder returns an Encoder writing to w.
func NewEncoder(w io.Writer) *Encoder { return &Encoder{w: w} }

// Encode writes e as one line using a single Write call.
func (enc *Encoder) Encode(e Entry) error {
	var err error
	enc.buf, err = AppendLine(enc.buf[:0], e)
	if err != nil {
		return err
	}
	_, err = enc.w.Write(enc.buf)
	return err
}
