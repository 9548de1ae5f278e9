// android.go: the objects built in the Android loaders' form
// (objects/*.c with objects/android_form.h), generated and committed like
// lanes' other objects: plain clang, no BTF (the loaders read none).
package android

//go:generate clang-19 -target bpfel -O2 -nostdinc -I../include -Wall -Werror -c objects/netnscookie.c -o objects/netnscookie.o
//go:generate clang-19 -target bpfel -O2 -nostdinc -I../include -Wall -Werror -c objects/bgclamp.c -o objects/bgclamp.o
//go:generate clang-19 -target bpfel -O2 -nostdinc -I../include -Wall -Werror -c objects/classifier.c -o objects/classifier.o
//go:generate clang-19 -target bpfel -O2 -nostdinc -I../include -Wall -Werror -c objects/sockops.c -o objects/sockops.o
