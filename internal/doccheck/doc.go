// Package doccheck holds checks on the repository's reference text: the
// reference pages (docs/*.md) and Go comments say what is and why, and
// name no commit; dated figures tied to commits live in docs/results/.
package doccheck
