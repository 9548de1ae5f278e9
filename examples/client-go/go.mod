module example.com/lanes-client-go

go 1.26.8

require github.com/lanes-net/lanes v0.0.0

replace github.com/lanes-net/lanes => ../..
