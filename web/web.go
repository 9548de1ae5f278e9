// Package web holds the dashboard's static assets (index.html, app.js,
// style.css), embedded into the lanes binary and served by
// internal/dashboard (`lanes dashboard`).
package web

import "embed"

// Assets is the dashboard page.
//
//go:embed index.html app.js style.css
var Assets embed.FS
