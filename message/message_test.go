package message

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestText(t *testing.T) {
	tests := []struct {
		parts []Part
		want  string
	}{
		{nil, ""},
		{[]Part{Text("a")}, "a"},
		{[]Part{Thinking("hmm", "sig"), Text("a"), ToolUse("1", "x", nil), Text("b")}, "ab"},
	}
	for _, tt := range tests {
		if got := (Message{Parts: tt.parts}).Text(); got != tt.want {
			t.Errorf("Text(%v) = %q, want %q", tt.parts, got, tt.want)
		}
	}
}

func TestToolUses(t *testing.T) {
	m := Message{Parts: []Part{Text("a"), ToolUse("1", "x", json.RawMessage(`{}`)), ToolUse("2", "y", nil)}}
	uses := m.ToolUses()
	if len(uses) != 2 || uses[0].ID != "1" || uses[1].Name != "y" {
		t.Fatalf("ToolUses = %+v", uses)
	}
}

func TestVisibleTo(t *testing.T) {
	tests := []struct {
		m    Message
		id   string
		want bool
	}{
		{UserText("hi"), "a", true},
		{Message{Role: Assistant, Source: Source{To: "a"}}, "a", true},
		{Message{Role: Assistant, Source: Source{To: "a"}}, "b", false},
		{Message{Role: Record}, "a", false},
	}
	for i, tt := range tests {
		if got := tt.m.VisibleTo(tt.id); got != tt.want {
			t.Errorf("%d: VisibleTo(%q) = %v, want %v", i, tt.id, got, tt.want)
		}
	}
}

func TestCloneIsDeep(t *testing.T) {
	orig := []Message{{Role: Assistant, Parts: []Part{ToolUse("1", "x", json.RawMessage(`{"a":1}`)), Text("t")}}}
	cp := CloneAll(orig)
	if d := cmp.Diff(orig, cp); d != "" {
		t.Fatalf("clone differs:\n%s", d)
	}
	cp[0].Parts[0].Data[2] = 'b'
	cp[0].Parts[1].Text = "changed"
	if string(orig[0].Parts[0].Data) != `{"a":1}` || orig[0].Parts[1].Text != "t" {
		t.Fatalf("clone shares memory with the original: %+v", orig)
	}
	if CloneAll(nil) != nil {
		t.Fatal("CloneAll(nil) != nil")
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{KindText: "text", KindToolUse: "tool_use", KindToolResult: "tool_result",
		KindThinking: "thinking", KindStructured: "structured", KindRecord: "record", 0: "unknown"} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", k, got, want)
		}
	}
}
