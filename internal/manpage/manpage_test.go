// manpage_test.go: roff escaping and each Markdown block the docs use.
package manpage

import (
	"strings"
	"testing"
)

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		`a-b \x`:     `a\-b \ex`,
		".TH x\n'y":  "\\&.TH x\n\\&'y",
		"plain text": "plain text",
	} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestInline(t *testing.T) {
	for in, want := range map[string]string{
		"run `lanes daemon --check` now":  `run \fBlanes daemon \-\-check\fR now`,
		"**held** and *late*":             `\fBheld\fR and \fIlate\fR`,
		"see [the API](api.md)":           "see the API",
		"see [mahimahi](https://x.org/m)": "see mahimahi <https://x.org/m>",
		"`a*b*c` stays":                   `\fBa*b*c\fR stays`,
		"rate x RTT, 2 * 3":               "rate x RTT, 2 * 3",
	} {
		if got := Inline(in); got != want {
			t.Errorf("Inline(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMarkdown(t *testing.T) {
	md := "# Title\n\nA paragraph\non two lines.\n\n## Every key\n\n### `coop:`\n\n" +
		"- one\n  more\n- two\n\n1. first\n2. second\n\n```\n.x -y\n```\n\n" +
		"| key | default | meaning |\n| --- | --- | --- |\n| `port` | 7431 | the UDP port |\n| `key` | | the group key |\n"
	var b strings.Builder
	Markdown(&b, md)
	want := ".PP\nA paragraph on two lines.\n.SH EVERY KEY\n.SS \\fBcoop:\\fR\n" +
		".IP \\(bu 4\none more\n.IP \\(bu 4\ntwo\n.IP 1. 4\nfirst\n.IP 2. 4\nsecond\n" +
		".PP\n.RS 4\n.nf\n\\&.x \\-y\n.fi\n.RE\n" +
		".TP\n\\fBport\\fR\ndefault: 7431\n.br\nthe UDP port\n.TP\n\\fBkey\\fR\nthe group key\n"
	if b.String() != want {
		t.Errorf("Markdown:\n%s\nwant:\n%s", b.String(), want)
	}
}
