package tables

import (
	"bytes"
	"io"
	"strings"
)

// CSV builds a CSV file as Python's csv module writes it with QUOTE_MINIMAL and pandas'
// to_csv defaults: "," between fields, "\n" after every row, a field quoted only when it
// holds ',', '"', CR or LF (a '"' inside is doubled), and a row of one empty field written as
// `""` so that it is not an empty line. Leading spaces and `\.` are never quoted.
type CSV struct {
	buf bytes.Buffer
}

// Row appends one row.
func (c *CSV) Row(fields ...string) {
	if len(fields) == 1 && fields[0] == "" {
		c.buf.WriteString("\"\"\n")
		return
	}
	for i, f := range fields {
		if i > 0 {
			c.buf.WriteByte(',')
		}
		if strings.ContainsAny(f, ",\"\r\n") {
			c.buf.WriteByte('"')
			c.buf.WriteString(strings.ReplaceAll(f, `"`, `""`))
			c.buf.WriteByte('"')
			continue
		}
		c.buf.WriteString(f)
	}
	c.buf.WriteByte('\n')
}

// Len is the number of bytes not yet taken by FlushTo.
func (c *CSV) Len() int { return c.buf.Len() }

// FlushTo writes the rows built so far to w and forgets them (a large file is then built in
// pieces); the error is w's.
func (c *CSV) FlushTo(w io.Writer) error {
	_, err := c.buf.WriteTo(w)
	return err
}

// Bytes returns the file written so far.
func (c *CSV) Bytes() []byte { return c.buf.Bytes() }
