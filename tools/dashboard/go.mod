module github.com/gorping/gorping/tools/dashboard

go 1.26.0

require github.com/grafana/grafana-foundation-sdk/go v0.0.22
